"""Script mode without processes: the static scan, the script's metric and accuracy, knobs held
when a script overrides them, the launch a script gets (torchrun env, --local-rank, launched once)
and an export that claims no knob the script overrode."""
from __future__ import annotations

from paths import REPO
import dataclasses
from pathlib import Path

import optuna
import pytest

from autotune.result import Outcome, TrialResult
from autotune.cli import main
from autotune.config import Config
from autotune.progress import Silent
from autotune.export.command import launch_command, render
from autotune.plan.build import build_plan
from autotune.probe import probe
from autotune.measure.script import metric_values, script_metric
from autotune.script.template import freeze
from autotune.script.scan import ScriptScan, scan_command, scan_text
from autotune.script.spec import ScriptSpec
from autotune.search.loop import run_search
from autotune.study import attrs as A
from autotune.study.attrs import SCRIPT_OVERRIDES
from autotune.search.options import SearchOptions
from autotune.search.references import make_sampler
from autotune.space.resolve import find_space, load_space, resolve
from autotune.study.storage import open_storage, open_study
from autotune.study.records import records
from autotune.probe.topology import Capabilities
from autotune.run.trial import TrialSettings, observed_fields, plan_trial, run_trial
from autotune.measure.observe import RankObservation
from autotune.measure.unacted import compare
from autotune.plan.launch_plan import RankExpect

MACHINES = REPO / "tests" / "fixtures" / "machines"
OWN_THREADS = REPO / "benchmarks" / "workloads" / "sets_own_threads.py"
SPAWNS = REPO / "benchmarks" / "workloads" / "spawns_own_workers.py"


@pytest.fixture
def topo():
    t = probe(str(MACHINES / "live-epyc-2cpu"), collect_capabilities=False)
    caps = Capabilities(allocators={"jemalloc": "/lib/libjemalloc.so.2"},
                        omp_runtimes={"libgomp": None, "libiomp5": "/lib/libiomp5.so"},
                        backends=("gloo",), numactl=True, numactl_membind=True, taskset=True)
    return dataclasses.replace(t, capabilities=caps)


# ---------------------------------------------------------------- the static scan

def test_scan_names_each_overriding_line_with_file_and_line():
    scan = scan_command(("python", str(OWN_THREADS)))
    assert [(f.line, f.knob, f.what) for f in scan.findings] == [
        (12, "threads", "sets OMP_NUM_THREADS"), (13, "kmp_affinity", "sets KMP_AFFINITY")]
    assert scan.overridden == ("threads", "kmp_affinity") and not scan.self_launching
    warning = scan.warning()
    assert warning.startswith("warning: ") and f"{OWN_THREADS}:12 sets OMP_NUM_THREADS" in warning
    assert len(warning.splitlines()) == 3       # one warning: a header and one line per finding


def test_scan_knows_calls_setdefault_preload_and_skips_comments_and_docstrings():
    text = '''"""Calls torch.set_num_threads(4) in the docstring: not code."""
import os
# os.environ["OMP_NUM_THREADS"] = "2"   (a comment)
os.environ.setdefault("OMP_NUM_THREADS", "4")
os.environ["LD_PRELOAD"] = "/usr/lib/libtcmalloc.so"
os.environ.update(KMP_BLOCKTIME="0")
torch.set_num_threads(8)
os.sched_setaffinity(0, {0})
parser.add_argument("--local_rank", type=int, default=0)
'''
    scan = scan_text(text, "train.py")
    got = [(f.where, f.knob, f.overrides) for f in scan.findings]
    assert got == [("train.py:4", "threads", False), ("train.py:5", "allocator", False),
                   ("train.py:6", "kmp_blocktime", True), ("train.py:7", "threads", True),
                   ("train.py:8", "binding", True)]
    assert scan.local_rank_arg == "--local_rank"
    assert scan.overridden == ("kmp_blocktime", "threads", "binding")


def test_scan_detects_scripts_that_start_their_own_workers():
    scan = scan_command(("python", "-u", str(SPAWNS), "--world-size", "2"))
    assert scan.self_launching and scan.overridden == ("nproc",)
    assert {f.what for f in scan.findings} == {"starts its own workers",
                                               "takes its own worker count (--world-size)"}
    assert scan_text("p = mp.Process(target=f)\n", "x.py").self_launching
    assert scan_command(("torchrun", "missing.py")).findings == ()


def test_scan_reads_a_scripts_first_mib_only(tmp_path):
    """Issue 46, item 9: the script may be named by a study someone else wrote; a line past the
    first MiB is not read, and the scan says it stopped there."""
    from autotune.script.scan import SCAN_BYTES
    line = "torch.set_num_threads(4)\n"
    early, late = tmp_path / "early.py", tmp_path / "late.py"
    early.write_text(line + "#\n" * (SCAN_BYTES // 4))
    assert scan_command(("python", str(early))).overridden == ("threads",)
    assert not scan_command(("python", str(early))).cut
    late.write_text("#\n" * (SCAN_BYTES // 2 + 1) + line)
    cut = scan_command(("python", str(late)))
    assert cut.cut and cut.findings == ()


# ---------------------------------------------------------------- metric and accuracy

LOG = "Training time: 2.000 s\nTraining time: 4.000 s\nTraining time: 3.000 s\n" \
      "Test accuracy: 80.00%\nTest accuracy: 91.50%\n"


def test_lower_is_better_scores_the_inverse_and_shows_the_time():
    sm = script_metric(report=None, log_text=LOG, metric=r"Training time: ([0-9.]+)",
                       wall_seconds=9.0, lower_is_better=True)
    assert sm.value == pytest.approx(1 / 3.0) and sm.source == "pattern"
    assert sm.shown == "3 (--metric, lower is better)"
    high = script_metric(report=None, log_text=LOG, metric=r"Training time: ([0-9.]+)",
                         wall_seconds=9.0)
    assert high.value == 3.0 and "higher is better" in high.shown
    # A 0 s time cannot be inverted: no metric rather than an infinite score.
    none = script_metric(report=None, log_text="Training time: 0\n", metric=r"time: ([0-9.]+)",
                         wall_seconds=1.0, lower_is_better=True)
    assert none.value is None and "positive" in none.problem


def test_accuracy_pattern_takes_the_last_match_and_understands_percent():
    sm = script_metric(report=None, log_text=LOG, metric=None, wall_seconds=2.5,
                       accuracy=r"Test accuracy: ([0-9.]+)")
    assert sm.accuracy == pytest.approx(0.915)
    assert metric_values("acc 93.5%", r"acc ([0-9.]+%)", percent=True) == [pytest.approx(0.935)]
    assert metric_values("acc 0.935", r"acc ([0-9.]+)", percent=True) == [0.935]
    # What autotune.report_metrics() says wins over the pattern.
    rep = script_metric(report={"accuracy": 0.5}, log_text=LOG, metric=None, wall_seconds=1.0,
                        accuracy=r"Test accuracy: ([0-9.]+)")
    assert rep.accuracy == 0.5


def test_wall_time_fallback_is_shown_in_seconds_per_run_never_samples():
    sm = script_metric(report=None, log_text="", metric=None, wall_seconds=12.5)
    assert sm.value == pytest.approx(1 / 12.5) and sm.source == "wall_time"
    assert sm.shown == "12.50 s per run (wall time)" and "samples" not in sm.shown


# ---------------------------------------------------------------- holding knobs

def test_freeze_holds_knobs_at_the_default_launch(topo):
    space = resolve(load_space(find_space("cpu")), topo)
    held, names = freeze(space, ["threads", "precision_not_a_knob"])
    assert names == ["threads"] and "threads" not in held.knobs and held.fixed["threads"] is None
    launched_once, names = freeze(space, ["nproc"])
    assert names == ["nproc"] and "ranks_per_numa_node" not in launched_once.knobs
    assert launched_once.to_config({}).nproc == 1


def _tiny_space(topo, tmp_path, nproc: str = "[1]"):
    path = tmp_path / "space.yaml"
    path.write_text("name: tiny\nknobs:\n  threads:\n    choices: [1, 2]\n  allocator:\n"
                    f"    choices: [default, jemalloc]\n  nproc:\n    choices: {nproc}\n"
                    "constraints:\n  - threads * nproc <= usable_cores\n")
    return resolve(load_space(str(path)), topo)


class Clock:
    def __init__(self):
        self.t = 0.0

    def elapsed(self) -> float:
        return self.t


def test_search_stops_varying_a_knob_the_script_overrides(topo, tmp_path):
    """An evaluator that reports, like a script trial, that planned threads did not act."""
    clock, seen = Clock(), []

    def evaluate(config: Config, mode: str) -> TrialResult:
        clock.t += 5
        seen.append(config)
        observed = {}
        if config.threads is not None:
            exp = [RankExpect(cpus=None, threads=config.threads, allocator=None,
                              omp_runtime=None, precision="fp32")]
            obs = [RankObservation(rank=0, pid=1, busy_threads=2 if config.threads == 1 else 8,
                                   num_threads=9, affinity=(0, 1), libraries=(),
                                   mempolicy=None)]
            observed = observed_fields(obs, compare(exp, obs))
        return TrialResult(outcome=Outcome.OK, throughput=10.0, seconds=5.0, **observed)

    study = open_study(open_storage(f"sqlite:///{tmp_path}/s.db"), "s", sampler=make_sampler(0))

    class Held(Silent):
        def __init__(self) -> None:
            self.knobs: list[dict] = []

        def knob_held(self, **info) -> None:
            self.knobs.append(info)

    heard = Held()
    run_search(study, space=_tiny_space(topo, tmp_path), topology=topo, evaluate=evaluate,
               clock=clock, options=SearchOptions(budget_s=1000, min_trial_s=1, max_trials=8,
                                                  reported_accuracy=True),
               progress=heard)
    first = next(i for i, c in enumerate(seen) if c.threads is not None)
    assert all(c.threads is None for c in seen[first + 1:]) and len(seen) > first + 1
    held = heard.knobs
    assert [h["knob"] for h in held] == ["threads"]
    assert held[0]["why"].startswith(f"threads={seen[first].threads} planned; rank 0 ran ")
    assert set(study.user_attrs[SCRIPT_OVERRIDES]) == {"threads"}
    stored = [r for r in records(study) if r.result.unacted]
    assert stored and "the script sets its own thread count" in stored[0].result.unacted[0]


def test_held_knobs_stay_held_on_resume_and_from_the_scan(topo, tmp_path):
    clock, seen = Clock(), []

    def evaluate(config: Config, mode: str) -> TrialResult:
        clock.t += 5
        seen.append(config)
        return TrialResult(outcome=Outcome.OK, throughput=10.0, seconds=5.0)

    study = open_study(open_storage(f"sqlite:///{tmp_path}/s.db"), "s", sampler=make_sampler(0))
    study.set_user_attr(SCRIPT_OVERRIDES, {"threads": "seen on an earlier run"})
    res = run_search(study, space=_tiny_space(topo, tmp_path, nproc="[1, 2]"), topology=topo,
                     evaluate=evaluate, clock=clock,
                     options=SearchOptions(budget_s=1000, min_trial_s=1, max_trials=5,
                                           reported_accuracy=True,
                                           overridden={"allocator": "train.py:5 sets LD_PRELOAD"}))
    searched = seen[2:]     # after the default launch and the run_cpu reference
    assert [c.nproc for c in searched] == [2] and res.stop_reason == "exhausted"
    assert all(c.threads is None and c.allocator == "default" for c in searched)
    assert study.user_attrs[SCRIPT_OVERRIDES] == {"threads": "seen on an earlier run",
                                                "allocator": "train.py:5 sets LD_PRELOAD"}


# ---------------------------------------------------------------- the launch a script gets

def test_script_ranks_get_torchrun_env_and_their_own_local_rank(topo, tmp_path):
    program = ("python", "train.py")
    plan = build_plan(Config(nproc=2, threads=1), topo, workdir=str(tmp_path), master_port=29500,
                      base_env={"GROUP_RANK": "7"}, program=program, script=True,
                      local_rank_arg="--local-rank", trial_id="t1")
    for r in plan.ranks:
        assert r.argv[-3:] == ("python", "train.py", f"--local-rank={r.rank}")
        assert r.env["LOCAL_RANK"] == str(r.rank) and r.env["ROLE_RANK"] == str(r.rank)
        assert r.env["GROUP_RANK"] == "0" and r.env["TORCHELASTIC_RUN_ID"] == "t1"
        assert r.env["LOCAL_WORLD_SIZE"] == "2" and r.env["MASTER_PORT"] == "29500"
    worker = build_plan(Config(nproc=2), topo, workdir=str(tmp_path), master_port=1, base_env={})
    assert "TORCHELASTIC_RUN_ID" not in worker.ranks[0].env


def test_a_self_launching_script_is_never_multiplied(topo, tmp_path):
    settings = TrialSettings(script=ScriptSpec.scanned(("python", str(SPAWNS))),
                             results_dir=str(tmp_path))
    assert settings.script.self_launching
    out = run_trial(Config(nproc=2, threads=1), topo, settings)
    assert out.outcome == Outcome.INFEASIBLE and "starts its own workers" in out.reason
    assert len(plan_trial(Config(threads=1), topo, settings).ranks) == 1


# ---------------------------------------------------------------- the export

def test_export_does_not_claim_knobs_the_script_overrode(topo):
    config = Config(nproc=2, threads=1, binding="taskset", allocator="jemalloc",
                    omp_runtime="libiomp5", kmp_affinity="compact")
    why = {"threads": "rank 0 ran 2 busy threads; train.py:12 sets OMP_NUM_THREADS",
           "kmp_affinity": "train.py:13 sets KMP_AFFINITY"}
    cmd = launch_command(config, topo, program=("python", "train.py"), script=True,
                         overridden=why, local_rank_arg="--local-rank")
    shell, torchrun = render(cmd, "shell"), render(cmd, "torchrun")
    for text in (shell, torchrun):
        code = "\n".join(ln for ln in text.splitlines() if not ln.startswith("#"))
        assert "OMP_NUM_THREADS" not in code and "KMP_AFFINITY" not in code
        assert "threads=1" not in text.splitlines()[0]     # the header's tuned knobs
        assert "# threads: not set here, the script sets its own (rank 0 ran 2 busy threads" in text
        assert "# kmp_affinity: not set here" in text
        assert "libjemalloc" in text and "KMP_BLOCKTIME" in text    # what did act stays
    assert "--local-rank=0" in shell and "--local-rank=1" in shell and "taskset" in shell
    assert "torchrun passes LOCAL_RANK only" in torchrun
    assert "TORCHELASTIC_RUN_ID" not in torchrun     # torchrun sets its own
    once = launch_command(Config(nproc=2, ranks_per_numa_node=2), topo, program=("python", "x.py"),
                          script=True, overridden={"nproc": "x.py:9 starts its own workers"})
    assert len(once.ranks) == 1


def test_bad_script_options_are_one_line_exit_2(capsys, tmp_path):
    for argv, needle in (
            (["--lower-is-better", "--", "python", str(OWN_THREADS)], "--lower-is-better applies"),
            (["--accuracy", "(a)(b)", "--", "python", str(OWN_THREADS)], "--accuracy '(a)(b)'"),
            (["--accuracy", "x: ([0-9]+)"], "--accuracy reads a script's output"),
            (["--lower-is-better"], "--lower-is-better reads a script's output")):
        rc = main(["search", "--budget", "2m", "--results", str(tmp_path), *argv])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("autotune: error: ") and needle in err, err
    assert not (tmp_path / "autotune.db").exists()


def test_export_takes_overrides_from_the_trials_and_from_certain_lines_of_the_script():
    from autotune.export.recommendation import script_launch
    scan = scan_text('import os\nos.environ["OMP_NUM_THREADS"] = "8"\nos.environ["LD_PRELOAD"] = "x"\n'
                     'parser.add_argument("--local-rank", type=int)\n', "train.py")
    got = script_launch({A.SCRIPT_SCAN: scan.to_json(),
                         A.SCRIPT_OVERRIDES: {"binding": "cpus 0 planned; rank 0 ran on cpus 0-1"}})
    assert got == {"script": True, "local_rank_arg": "--local-rank",
                   "overridden": {"threads": "train.py:2 sets OMP_NUM_THREADS",
                                  "binding": "cpus 0 planned; rank 0 ran on cpus 0-1"}}


def test_report_of_a_script_study_says_what_its_score_is(tmp_path):
    from autotune.reporting.format import _table
    from autotune.reporting.report import build_report
    from autotune.reporting.script import script_facts
    facts = script_facts({A.SCRIPT_COMMAND: ["python", "t.py"], A.SCRIPT_METRIC: "time: (\\d+)",
                           A.SCRIPT_LOWER_IS_BETTER: True,
                           A.SCRIPT_OVERRIDES: {"threads": "rank 0 ran 2 busy threads"}})
    assert facts["unit"] == "score"
    assert facts["script_notes"] == ("score = 1 / the median of --metric 'time: (\\\\d+)' "
                                     "(lower is better)",
                                     "not tuned, the script sets its own threads: rank 0 ran 2 "
                                     "busy threads")
    assert "1 / wall seconds" in script_facts({A.SCRIPT_COMMAND: ["x"]})["script_notes"][0]
    assert script_facts({}) == {} and "score" in _table([], "score")[0]
    study = open_study(open_storage(f"sqlite:///{tmp_path}/s.db"), "s", sampler=make_sampler(0))
    A.write_script(study, ScriptSpec(command=("python", "t.py"), scan=ScriptScan(path="t.py")))
    report = build_report(study)
    assert report.unit == "score" and "samples/s" not in report.text()


def test_the_scan_alone_holds_only_what_no_process_shows_and_the_rank_count():
    assert ScriptSpec.scanned(("python", str(OWN_THREADS))).held() == {
        "kmp_affinity": f"{OWN_THREADS}:13 sets KMP_AFFINITY"}      # threads: seen per trial
    assert set(ScriptSpec.scanned(("python", str(SPAWNS))).held()) == {"nproc"}
    assert ScriptSpec.scanned(("python", "missing.py")).held() == {}


def test_dashboard_note_of_a_script_study_shows_a_score_not_samples():
    from autotune.dashboard import note_markdown
    rec = {"throughput": 0.5, "default_throughput": 0.25, "config": {}}
    assert "- score: 0.5 (default launch 0.25" in note_markdown("s", rec, None, "score")
    assert "samples/s" not in note_markdown("s", rec, None, "score")
    assert "- throughput: 0.5 samples/s" in note_markdown("s", rec, None)


def test_a_script_gets_its_seed_through_the_command_or_its_environment(tmp_path):
    from autotune.config import Config
    from autotune.script.template import fill, placeholders, takes_seed
    assert placeholders(("python", "t.py", "--seed", "{seed}", "--threads", "{threads}")) == \
        ["threads"]                                    # {seed} is not a knob
    assert fill(("t.py", "--seed", "{seed}"), Config(), 2) == ("t.py", "--seed", "2")
    assert fill(("t.py", "--seed", "{seed}"), Config()) == ("t.py", "--seed", "0")
    assert takes_seed(("python", "t.py", "--seed={seed}"))
    reads = tmp_path / "reads.py"
    reads.write_text("import os\nseed = int(os.environ.get('AUTOTUNE_SEED', 0))\n")
    plain = tmp_path / "plain.py"
    plain.write_text("print('no seed here')\n")
    assert takes_seed(("python", str(reads))) and not takes_seed(("python", str(plain)))
