"""The user's own training: an entry point (`--workload module:function`) and a plain script
(`-- python train.py {knob}`), tuned end to end, plus the fail-fast cases and the pure parts of
script mode (placeholders, metric choice, the client API)."""
from __future__ import annotations

from paths import REPO
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune.config import Config
from autotune.errors import WorkloadError
from autotune.measure.script import script_metric
from autotune.script.template import fill, placeholders

PLAIN = "benchmarks/workloads/plain_ddp.py"
METRIC = r"throughput: ([0-9.]+) samples/s"


def cli(tmp: Path, *argv: str, timeout: float = 200) -> tuple[int, str, str, float]:
    """`python -m autotune ...` in the repo; TMPDIR under tmp keeps the machine lock private."""
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": f"{tmp}{os.pathsep}{REPO}",
           "PYTHONUNBUFFERED": "1"}
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "autotune", *argv], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def space(tmp: Path, body: str) -> str:
    path = tmp / "space.yaml"
    path.write_text(body)
    return str(path)


def search(tmp: Path, *argv: str, budget: str = "60s") -> tuple[int, str, str, float]:
    return cli(tmp, "search", "--budget", budget, "--verify-rounds", "1", "--max-verify-rounds", "1", "--trial-timeout", "60",
               "--results", str(tmp / "results"), *argv)


# ---------------------------------------------------------------- pure parts

def test_placeholders_are_knobs_and_are_filled():
    t = ("python", "train.py", "--bs={batch_size}", "--amp", "{precision}", "--t", "{threads}")
    assert placeholders(t) == ["batch_size", "precision", "threads"]
    assert fill(t, Config(batch_size=64, precision="bf16")) == (
        "python", "train.py", "--bs=64", "--amp", "bf16", "--t", "auto")
    with pytest.raises(WorkloadError, match=r"\{lr\} is not a knob; knobs: .*\{batch_size\}"):
        placeholders(("python", "train.py", "--lr", "{lr}"))


def test_metric_preference_report_then_pattern_then_wall_time():
    log = "throughput: 10 samples/s\nthroughput: 30 samples/s\nthroughput: 20 samples/s\n"
    m = script_metric(report={"samples_per_sec": 99.0, "accuracy": 0.5}, log_text=log,
                      metric=METRIC, wall_seconds=2.0)
    assert (m.value, m.source, m.accuracy) == (99.0, "report", 0.5)
    m = script_metric(report=None, log_text=log, metric=METRIC, wall_seconds=2.0)
    assert (m.value, m.source, m.values) == (20.0, "pattern", (10.0, 30.0, 20.0))  # the median
    m = script_metric(report=None, log_text="nothing", metric=METRIC, wall_seconds=2.0)
    assert m.value is None and "no metric found in the output" in m.problem
    m = script_metric(report={"samples": 100}, log_text="", metric=None, wall_seconds=4.0)
    assert (m.value, m.source) == (25.0, "wall_time")


def test_report_is_a_noop_outside_autotune_and_merges_inside(tmp_path, monkeypatch):
    import autotune.reporting.report  # noqa: F401 - importing the report stage must not shadow the API
    monkeypatch.delenv("AUTOTUNE_REPORT", raising=False)
    assert autotune.report_metrics(samples_per_sec=1.0) is False
    path = tmp_path / "r.json"
    monkeypatch.setenv("AUTOTUNE_REPORT", str(path))
    assert autotune.report_metrics(samples_per_sec=12.5) is True
    autotune.report(accuracy=0.75)   # its name in earlier versions: scripts that call it work
    assert json.loads(path.read_text()) == {"samples_per_sec": 12.5, "accuracy": 0.75}


# ---------------------------------------------------------------- autotune run -- CMD

@pytest.mark.slow   # a real trial of a script
def test_run_scores_a_script_by_its_report(tmp_path):
    script = tmp_path / "reporting.py"
    script.write_text("import os, autotune\n"
                      "assert os.environ['WORLD_SIZE'] == '2' and 'MASTER_PORT' in os.environ\n"
                      "autotune.report_metrics(samples_per_sec=100.0 + int(os.environ['RANK']),"
                      " accuracy=0.9)\n"
                      "print('batch', os.environ['RANK'], {!r})\n".format("{batch_size}"))
    rc, out, err, _ = cli(tmp_path, "run", "--set", "nproc=2", "--set", "threads=1",
                          "--set", "global_batch=96", "--json", "--results", str(tmp_path / "r"),
                          "--", sys.executable, str(script), "--bs", "{batch_size}")
    assert rc == 0, out + err
    res = json.loads(out)
    assert res["metric_source"] == "report" and res["accuracy"] == 0.9
    assert res["measurement"]["throughput"] == 100.0        # rank 0's report is the score


@pytest.mark.slow   # a real trial of a script
def test_run_reads_numbers_as_scripts_print_them(tmp_path):
    # the line of an unmodified public DDP benchmark (issue 28): a thousands separator, the
    # unit left in by a wide pattern, and a warm-up line whose figure is not a number yet
    script = tmp_path / "bench.py"
    script.write_text("print('Throughput       : n/a samples/s')\n"
                      "print('Throughput       : 6,508 samples/s')\n"
                      "print('Throughput       : 1.2e4 samples/s')\n"
                      "print('Throughput       : 7,000 samples/s')\n")
    argv = ("run", "--set", "threads=1", "--json", "--results", str(tmp_path / "r"))
    rc, out, err, _ = cli(tmp_path, *argv, "--metric", r"Throughput\s*:\s*([0-9,]+) samples/s",
                          "--", sys.executable, str(script))
    assert rc == 0, out + err
    res = json.loads(out)
    assert res["metric_source"] == "pattern" and res["measurement"]["throughput"] == 6754.0
    rc, out, err, _ = cli(tmp_path, *argv, "--metric", r"Throughput\s*:\s*(.+)",
                          "--", sys.executable, str(script))
    assert rc == 0 and json.loads(out)["measurement"]["throughput"] == 7000.0, out + err
    # a pattern whose group holds no number anywhere: the reason names the text it matched
    rc, out, err, _ = cli(tmp_path, *argv, "--metric", r"Throughput\s*:\s*(\S+) samples",
                          "--", sys.executable, "-c", "print('Throughput : n/a samples/s')")
    res = json.loads(out)
    assert rc == 1 and res["outcome"] == "workload_error", out + err
    assert "its group is not a number: 'n/a', in the matched text 'Throughput : n/a samples'" \
        in res["reason"], res["reason"]


# ---------------------------------------------------------------- fail fast, fail clearly

def _fails_fast(rc: int, err: str, secs: float, *needles: str, limit: float = 45) -> None:
    assert rc == 2, err
    last = [ln for ln in err.splitlines() if ln.strip()][-1]   # progress lines come before it
    assert last.startswith("autotune: error: ") and "Traceback (most recent" not in err, err
    for needle in needles:
        assert needle in last, err
    assert secs < limit, f"took {secs:.0f}s"


def test_script_not_found_stops_at_once(tmp_path):
    rc, _, err, secs = search(tmp_path, "--", sys.executable, "no/such/train.py")
    _fails_fast(rc, err, secs, "script not found: no/such/train.py", limit=20)


@pytest.mark.slow   # a real trial of a script
def test_script_raising_import_error_stops_on_the_first_trial(tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("import json\nimport torchvision_but_misspelled\n")
    rc, _, err, secs = search(tmp_path, "--", sys.executable, str(script))
    _fails_fast(rc, err, secs, "fails on the default launch",
                "No module named 'torchvision_but_misspelled'")


@pytest.mark.slow   # a real trial of a script
def test_metric_that_never_matches_stops_on_the_first_trial(tmp_path):
    rc, _, err, secs = search(tmp_path, "--metric", "img/s: ([0-9.]+)", "--",
                              sys.executable, PLAIN, "--steps", "10")
    _fails_fast(rc, err, secs, "no metric found in the output", "throughput:")


def test_entry_point_returning_the_wrong_type_stops_before_any_trial(tmp_path):
    (tmp_path / "wrongtype.py").write_text("def build():\n    return 42\n")
    rc, _, err, secs = search(tmp_path, "--workload", "wrongtype:build")
    _fails_fast(rc, err, secs, "wrongtype:build", "returned int", limit=20)
    assert not (tmp_path / "results" / "trials").exists()


# ---------------------------------------------------------------- tuned end to end

@pytest.mark.slow
@pytest.mark.scenario
def test_entry_point_is_tuned_and_exported(tmp_path):
    # tcmalloc against the default allocator: the same arithmetic, so the accuracy gate plays no
    # part. Which one wins is chance: on the 2-core AMD EPYC family 25 (Zen 4) this small MLP
    # measured 0.91x, 1.04x and 1.09x with tcmalloc in three 1-round verifications (1 s windows,
    # 2026-11-24), so the test checks that both were tuned and that the export carries whichever
    # was recommended
    s = space(tmp_path, "name: entry\nknobs:\n  allocator: [default, tcmalloc]\n"
                        "fixed:\n  threads: 1\nconstraints: []\n")
    # short quality runs: under load the default's 3-seed noise floor at 16384 samples took the
    # whole 60 s budget and left one trial (seen in the full suite); this test is about the
    # entry point, and the quality machinery has its own tests
    rc, out, err, _ = search(tmp_path, "--workload", "benchmarks.workloads.entry:build",
                             "--space", s, "--seconds", "1", "--quality-samples", "2048",
                             "--quality-seeds", "2", "--json", budget="90s")
    assert rc == 0, out[-2000:] + err[-2000:]
    summary = json.loads(out[out.index("{"):])
    rec = summary["recommendation"]
    assert rec is not None and summary["trials_run"] >= 3, err[-3000:]
    assert "--workload benchmarks.workloads.entry:build" in summary["command"]
    rc, text, err, _ = cli(tmp_path, "export", "--results", str(tmp_path / "results"))
    assert rc == 0, err
    assert "-m autotune.worker --workload benchmarks.workloads.entry:build" in text
    assert rec["verified"], rec
    assert ("libtcmalloc" in text) == (rec["config"]["allocator"] == "tcmalloc"), (rec, text)
    # every measured search trial stores the CPU share its window got (the report's busy flag)
    import optuna
    study = optuna.load_study(study_name=summary["study"],
                              storage=f"sqlite:///{tmp_path}/results/autotune.db")
    # (a "repeat" row only points at the measured trial it reuses: it measured nothing itself)
    ok = [t for t in study.trials if t.user_attrs.get("outcome") == "ok"
          and t.user_attrs.get("role") != "repeat"]
    assert ok and all(0 < t.user_attrs["cpu_share"] <= 1.5 for t in ok), \
        [t.user_attrs.get("cpu_share") for t in ok]
    assert {t.user_attrs["config"]["allocator"] for t in ok} == {"default", "tcmalloc"}


@pytest.mark.slow
@pytest.mark.scenario
def test_plain_script_is_tuned_through_its_output_and_export_reproduces_it(tmp_path):
    s = space(tmp_path, "name: plain\nknobs:\n  global_batch: [16, 64]\n"
                        "fixed:\n  nproc: 2\n  threads: 1\nconstraints: []\n")
    rc, out, err, _ = search(tmp_path, "--space", s, "--metric", METRIC, "--json", "--",
                             sys.executable, PLAIN, "--batch-size", "{batch_size}",
                             "--steps", "20", "--hidden", "128", budget="80s")
    assert rc == 0, out[-2000:] + err[-2000:]
    summary = json.loads(out[out.index("{"):])
    rec = summary["recommendation"]
    assert rec is not None
    from tests.search_harness import load_study
    trials = [t for t in load_study(tmp_path).trials  # measured here, not a reused "repeat" row
              if t.user_attrs.get("outcome") == "ok" and "metric_source" in t.user_attrs]
    assert len(trials) >= 3
    assert {t.user_attrs["metric_source"] for t in trials} == {"pattern"}
    # the budget fits the references and one or two of the space's configurations
    assert {t.user_attrs["config"]["global_batch"] for t in trials} & {16, 64}
    rc, text, err, _ = cli(tmp_path, "export", "--results", str(tmp_path / "results"))
    assert rc == 0, err
    cfg = rec["config"]
    # {batch_size} is each rank's share of the global batch
    share = Config.from_dict(cfg).micro_batch
    assert f"{PLAIN} --batch-size {share} --steps 20 --hidden 128" in text
    assert "AUTOTUNE_REPORT" not in text and "AUTOTUNE_RESULT" not in text
    # the pasted command is a real run of the user's script with the tuned values
    done = subprocess.run(["bash", "-c", text.replace("MASTER_PORT=29500", "MASTER_PORT=0")
                           if cfg["nproc"] == 1 else text], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "throughput:" in done.stdout
