"""Small breaks a new user met in the first hour (issue 35): a misplaced flag after `--`, a knob
typo, a refused search leaving a study file, --help lagging behind the knob table and the
workload registry, and the two intervals side by side in the summary."""
from __future__ import annotations

import re
import tempfile

import pytest

from autotune.cli import main
from autotune.config import KNOB_TABLE, Config, parse_sets
from autotune.errors import ConfigError, SpaceError
from autotune.recommend.settle import settle
from autotune.recommend.recommendation import Recommendation


def _main(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as exc:   # argparse's own errors exit from inside parse_args
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("argv, flag", [
    (["launch", "--", "python", "train.py", "--dry-run"], "--dry-run"),
    (["run", "--", "python", "train.py", "--epochs", "1", "--dry-run"], "--dry-run"),
    (["search", "--", "python", "train.py", "--budget", "5m"], "--budget"),
    (["search", "--", "python", "train.py", "--budget=5m"], "--budget"),
])
def test_an_autotune_flag_after_the_double_dash_is_refused(tmp_path, monkeypatch, capsys, argv,
                                                           flag):
    """`launch -- python train.py --dry-run` gave the flag to the user's command, which then
    really ran; now one line saying where the flag goes, exit 2, nothing created."""
    monkeypatch.chdir(tmp_path)
    rc, out, err = _main(argv, capsys)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"autotune: error: {flag} comes after `--`")
    assert "put it before `--`" in lines[0] and out == ""
    assert list(tmp_path.iterdir()) == []


def test_the_users_own_flags_after_the_double_dash_are_theirs(tmp_path, monkeypatch, capsys):
    """Only flags that decide whether autotune runs are refused: a script's --seed or --json
    (flags autotune has too) stay the script's."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('hi')\n")
    rc, out, err = _main(["run", "--dry-run", "--", "python", "train.py", "--seed", "3",
                          "--json"], capsys)
    assert rc == 0, err
    assert "train.py --seed 3 --json" in out


@pytest.mark.parametrize("typo, meant", [("nprocs", "nproc"), ("thread", "threads"),
                                         ("allocater", "allocator")])
def test_a_knob_typo_says_did_you_mean(typo, meant):
    with pytest.raises(ConfigError, match=rf"unknown knob '{typo}' \(did you mean '{meant}'"):
        parse_sets([f"{typo}=2"])
    with pytest.raises(ConfigError, match=rf"did you mean '{meant}'"):
        Config.from_dict({typo: 2}, where="launch.json")


def test_a_knob_typo_in_a_space_file_says_did_you_mean(tmp_path):
    from autotune.space.spec import load_space
    path = tmp_path / "space.yaml"
    path.write_text("knobs:\n  nprocs: [1, 2]\n")
    with pytest.raises(SpaceError, match=r"unknown knob 'nprocs' \(did you mean 'nproc'\?\)"):
        load_space(path)


def test_a_name_far_from_every_knob_gets_no_guess():
    with pytest.raises(ConfigError) as info:
        parse_sets(["colour=red"])
    assert "did you mean" not in str(info.value) and "valid knobs: nproc" in str(info.value)


def test_run_set_typo_is_one_line_with_the_suggestion(capsys):
    rc, _, err = _main(["run", "--set", "nprocs=2", "--dry-run"], capsys)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "did you mean 'nproc'?" in lines[0], err


def test_a_search_refused_by_the_machine_lock_creates_nothing(tmp_path, monkeypatch, capsys):
    """The refused search used to leave autotune-results/autotune.db behind: the study file was
    created before the machine lock was asked for."""
    from autotune.probe import probe
    from autotune.search.lock import MachineLock
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))   # the lock file, under tmp
    monkeypatch.chdir(tmp_path)
    holder = MachineLock(probe().fingerprint()).acquire()
    try:
        rc, _, err = _main(["search", "--budget", "5m"], capsys)
    finally:
        holder.release()
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, err
    assert "another autotune search is running on this machine" in lines[0]
    assert not (tmp_path / "autotune-results").exists()


def _help(argv: list[str], capsys, option: str) -> str:
    """The help text of one option, its wrapped lines joined."""
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    text = capsys.readouterr().out
    block = text.split(f"  {option}", 1)[1].split("\n  -", 1)[0]
    return " ".join(block.split())


def test_run_help_lists_exactly_the_knobs_of_the_table(capsys):
    """`run --help` listed 18 of the 24 knobs: the list is generated from config.KNOB_TABLE."""
    line = _help(["run"], capsys, "--set KNOB=VALUE")
    listed = re.findall(r"(?:: |, )([a-z_]+)(?: \([^)]*\))?", line.split("set one knob", 1)[1])
    assert listed == list(KNOB_TABLE)
    assert "binding (none|taskset|taskset_smt|numactl|numactl_smt)" in line
    assert "channels_last (true|false)" in line and "threads (auto)" in line


@pytest.mark.parametrize("command", ["run", "search", "compare"])
def test_workload_help_lists_every_builtin_workload_of_the_registry(capsys, command):
    """`--workload` help named 3 of the 4 built-in workloads (wide_mlp was missing)."""
    from autotune.worker.workloads import WORKLOADS
    line = _help([command], capsys, "--workload NAME")
    assert f"built-in workload ({', '.join(WORKLOADS)};" in line


def _settled_rec() -> Recommendation:
    s = settle([2.60, 2.61, 2.62, 2.59, 2.63], [None] * 5)
    assert s is not None and s.settled
    return Recommendation(config=Config(nproc=2), speedup=s.ratio, spread=0.04, rounds=5,
                          verified=True, settling=s, vs_run_cpu=1.81)


def test_a_settled_speedup_shows_one_interval_the_95_percent_one():
    """'2.61x (±0.04)' next to '95% interval 2.37-2.71x' read as two claims: one interval."""
    head = _settled_rec().headline()
    assert head == "verified speedup 2.61x over the default launch (95% interval 2.59-2.63x, " \
        "5 rounds)"
    assert "±" not in head


def test_the_search_summary_prints_the_interval_once_and_says_what_run_cpu_is(capsys):
    from autotune.display.progress import TerminalProgress as Progress
    from autotune.search.options import SearchResult
    rec = _settled_rec()
    result = SearchResult(records=[], measured=5, default=None, run_cpu=None,
                          stop_reason="budget")
    Progress(budget_s=60, quiet=True, live=False).finish(result, rec, None, 30.0)
    out = capsys.readouterr().out
    assert out.count("95% interval") == 1 and "±" not in out
    assert "1.81x over run_cpu's settings (torch.backends.xeon.run_cpu's rules, reproduced" in out


GLOSSARY_TERMS = ("math class", "noise floor", "leader", "window", "stagnated", "oracle",
                  "landscape", "fingerprint", "pp", "goodput", "PED-ANOVA", "run_cpu", "split",
                  "ceiling")


def test_the_glossary_explains_every_term_and_the_readme_links_it():
    from paths import REPO
    doc = (REPO / "docs" / "how-it-works.md").read_text()
    glossary = doc.split("\n## Glossary\n", 1)[1]
    missing = [t for t in GLOSSARY_TERMS if f"- **{t}**" not in glossary
               and f"- **{t} (" not in glossary]
    assert not missing, missing
    readme = (REPO / "README.md").read_text()
    assert "(docs/how-it-works.md#glossary)" in readme


def test_a_placeholder_typo_in_the_command_says_did_you_mean():
    from autotune.errors import WorkloadError
    from autotune.script.template import placeholders
    with pytest.raises(WorkloadError, match=r"\{nprocs\} is not a knob \(did you mean 'nproc'\?\)"):
        placeholders(("python", "train.py", "--ranks", "{nprocs}"))


def _default_recommended(tmp_path, settling) -> str:
    from autotune.export.recommendation import save_recommendation
    from autotune.study.storage import describe_study, open_storage, open_study, study_name
    from results_study import live_topology
    topo = live_topology()
    url = f"sqlite:///{tmp_path}/s.db"
    study = open_study(open_storage(url), study_name("mlp", topo))
    describe_study(study, topology=topo, workload="mlp", space={}, settings={})
    save_recommendation(study, Recommendation(config=Config(), speedup=1.0, spread=0.0, rounds=4,
                                              verified=True, default_wins=True,
                                              settling=settling), topo, "mlp")
    return url


def test_launch_refuses_a_default_launch_recommended_only_because_nothing_settled(tmp_path,
                                                                                   capsys):
    """The search ended 'no verified speedup: the best candidate measured unsettled', stored the
    default launch, and `launch --dry-run` went ahead (exit 0) although its help says a study
    without a verified recommendation is refused. Now: one line with the reason and the fix."""
    url = _default_recommended(tmp_path, settle([1.8, 4.3, 2.1], [0.4, 0.4, 0.0]))
    train = tmp_path / "t.py"
    train.write_text("print('trained')\n")
    rc, out, err = _main(["launch", "--storage", url, "--dry-run", "--", "python", str(train)],
                         capsys)
    lines = err.strip().splitlines()
    assert rc == 2 and out == "" and len(lines) == 1, err
    assert "holds no verified recommendation (no verified speedup: the best candidate" in lines[0]
    assert "run `autotune verify` when the machine is quiet" in lines[0]
    assert lines[0].endswith("--force launches it anyway")
    rc, out, err = _main(["launch", "--storage", url, "--dry-run", "--force", "--", "python",
                          str(train)], capsys)
    assert rc == 0 and "(--force)" in err


def test_launch_takes_a_settled_verdict_that_the_default_launch_is_best(tmp_path, capsys):
    url = _default_recommended(tmp_path, settle([0.99, 1.0, 1.01, 1.0], [0.0] * 4))
    train = tmp_path / "t.py"
    train.write_text("print('trained')\n")
    rc, out, err = _main(["launch", "--storage", url, "--dry-run", "--", "python", str(train)],
                         capsys)
    assert rc == 0, err
