"""Bad input at the level of `autotune search` (issue 7): budgets, space files, workload specs,
storage URLs and the other options. Each gets one line naming the problem and where, exit 2, no
traceback without --debug, no trial launched, and the study already in --results left byte for
byte as it was. Cases checked elsewhere (report/export/dashboard storages, --set, sysfs roots,
space-file details) are listed with these in tests/BAD_INPUT.md."""
from __future__ import annotations

from paths import TESTS
import sys
import tempfile
from pathlib import Path

import pytest

from autotune.cli import PASSWORD_WARNING, main
from results_study import sha256, study_copy

SECRET = "s3cret"

SPACES = {
    "unknown_knob": ("knobs:\n  colour: [red]\n", "knobs.colour: unknown knob 'colour'"),
    "empty_choices": ("knobs:\n  threads:\n    choices: []\n", "knobs.threads.choices: empty list"),
    "wrong_type": ("knobs:\n  threads: [1, two]\n", "threads='two' must be an integer"),
    "impossible": ("knobs:\n  threads: [1]\nconstraints: ['threads > usable_cores']\n",
                   "constraints: no combination of the choices satisfies them on this machine"),
    "bad_yaml": ("knobs:\n  threads: [1\n", "invalid YAML"),
    "not_a_mapping": ("- threads\n", "top level must be a mapping"),
    "bad_expression": ("knobs:\n  threads: ['divisors(cores)']\n", "unknown name 'cores'"),
}

CASES = {
    # budgets
    "budget_empty": (["--budget", ""], "--budget: empty"),
    "budget_unit": (["--budget", "10x"], "--budget '10x': not a duration"),
    "budget_order": (["--budget", "30m1h"], "--budget '30m1h': not a duration"),
    "budget_negative": (["--budget=-5m"], "--budget '-5m': budget must be positive"),
    # argparse took '-5m' for an option: "expected one argument" (issue 35)
    "budget_negative_spaced": (["--budget", "-5m"], "--budget '-5m': budget must be positive"),
    "budget_zero": (["--budget", "0"], "--budget '0': must be more than zero"),
    "budget_too_short": (["--budget", "30s"], "--budget 30s is too short"),
    "budget_too_long": (["--budget", "9999h"], "more than a week"),
    # --run-length (issue 59): a positive duration as --budget takes it, or a step count
    "run_length_empty": (["--run-length", ""], "--run-length: empty"),
    "run_length_unit": (["--run-length", "2 hours"], "--run-length '2 hours': not a duration"),
    "run_length_negative": (["--run-length", "-2h"],
                            "--run-length '-2h': run length must be positive"),
    "run_length_zero": (["--run-length", "0"], "--run-length '0': must be more than zero"),
    "run_length_zero_steps": (["--run-length", "0steps"],
                              "--run-length '0steps': steps must be from 1"),
    "run_length_fraction_steps": (["--run-length", "2.5 steps"],
                                  "--run-length '2.5 steps': steps are a whole number"),
    "run_length_too_long": (["--run-length", "9999999h"], "more than a year of training"),
    "run_length_steps_of_a_script": (["--run-length", "5000steps", "--", "python", "train.py"],
                                     "--run-length 5000 steps: a script's score is not samples "
                                     "per second"),
    # search-space files
    "space_missing": (["--space", "{tmp}/nope.yaml"], "nope.yaml: search-space file not found"),
    "space_is_a_folder": (["--space", "{tmp}"], "{tmp}: search-space file not found"),
    **{f"space_{k}": (["--space", f"{{tmp}}/{k}.yaml"], f"{k}.yaml: ") for k in SPACES},
    # workload specs
    "workload_missing_module": (["--workload", "no_such_module:build"],
                                "workload 'no_such_module:build': cannot import no_such_module"),
    "workload_missing_attribute": (["--workload", "fault_workload:nope"],
                                   "fault_workload has no callable 'nope'"),
    "workload_wrong_return_type": (["--workload", "fault_workload:not_a_spec"],
                                   "not_a_spec() returned int, expected"),
    "workload_build_raises": (["--workload", "fault_workload:raises"],
                              "failed when loaded: RuntimeError: fault_workload.raises"),
    "workload_no_function": (["--workload", "fault_workload:"], "expected module:function"),
    "workload_unknown_name": (["--workload", "resnet9000"],
                              "unknown workload 'resnet9000'; valid workloads: cnn, transformer"),
    "workload_script_not_found": (["--workload", "{tmp}/train.py"],
                                  "train.py'; valid workloads: cnn"),
    # storage URLs (the study in --results must not be touched by any of them)
    "storage_not_a_url": (["--storage", "autotune.db"], "storage 'autotune.db': not a URL"),
    "storage_garbage_file": (["--storage", "sqlite:///{tmp}/garbage.db"],
                             "garbage.db is not an SQLite database"),
    "storage_unknown_dialect": (["--storage", "nosuchdb://u@h/db"], "storage nosuchdb://u@h/db"),
    "storage_password_unreachable": (
        ["--storage", f"postgresql://user:{SECRET}@127.0.0.1:1/db"],
        "storage postgresql://user:***@127.0.0.1:1/db"),
    "storage_sqlcipher_passphrase": (
        ["--storage", f"sqlite+pysqlcipher://:{SECRET}@/{{tmp}}/x.db"],
        "storage sqlite+pysqlcipher://:***@/"),
    "storage_password_in_query": (
        ["--storage", f"postgresql://user@127.0.0.1:1/db?sslmode=disable&password={SECRET}"],
        "storage postgresql://user@127.0.0.1:1/db?password=***&sslmode=disable"),
    "storage_folder_not_creatable": (["--storage", "sqlite:///{tmp}/results/garbage/sub/x.db"],
                                     "cannot create"),
    # a folder outside --results is never created (it was, silently, as root, anywhere)
    "storage_folder_outside_results": (["--storage", "sqlite:///{tmp}/elsewhere/dir/x.db"],
                                       "folder {tmp}/elsewhere/dir does not exist; autotune "
                                       "creates folders only under --results"),
    "storage_folder_nonexistent_root": (["--storage", "sqlite:////nonexistent/dir/x.db"],
                                        "folder /nonexistent/dir does not exist"),
    # SQLite said only "(sqlite3.OperationalError) unable to open database file" (issue 35)
    "storage_not_creatable": (["--storage", "sqlite:////proc/x.db"],
                              "cannot create /proc/x.db: No such file or directory"),
    "journal_folder_outside_results": (["--storage", "journal:///{tmp}/elsewhere/j.log"],
                                       "folder {tmp}/elsewhere does not exist"),
    # other options
    "max_accuracy_drop_negative": (["--max-accuracy-drop", "-1"],
                                   "--max-accuracy-drop: '-1' must be from 0 to below 100"),
    "max_accuracy_drop_nan": (["--max-accuracy-drop", "nan"],
                              "--max-accuracy-drop: 'nan' must be from 0 to below 100"),
    "max_accuracy_drop_100": (["--max-accuracy-drop", "100"],
                              "--max-accuracy-drop: '100' must be from 0 to below 100"),
    "max_accuracy_drop_text": (["--max-accuracy-drop", "one"],
                               "--max-accuracy-drop: 'one' is not a number"),
    "verify_rounds_zero": (["--verify-rounds", "0"], "--verify-rounds 0: must be at least 1"),
    "max_verify_rounds_below": (["--verify-rounds", "3", "--max-verify-rounds", "2"],
                                "--max-verify-rounds 2: must be at least --verify-rounds (3)"),
    "guide_unknown": (["--guide", "fast"], "argument --guide: invalid choice: 'fast'"),
    "seconds_zero": (["--seconds", "0"], "'0' must be greater than 0"),
    # a rank refuses a window longer than a day (config/limits.py, issue 52): said here first
    "seconds_inf": (["--seconds", "inf"], "'inf' is more than 86400 s (a day)"),
    "seconds_too_long": (["--seconds", "100000"], "'100000' is more than 86400 s (a day)"),
    "quality_seeds_too_many": (["--quality-seeds", "1000"], "--quality-seeds 1000: at least 2 "
                               "seeds are needed to measure the noise, and at most 64"),
    "trial_timeout_text": (["--trial-timeout", "soon"], "'soon' is not a number"),
    "idle_timeout_negative": (["--idle-timeout=-1"], "--idle-timeout: '-1' must be 0 or more"),
    "idle_timeout_text": (["--idle-timeout", "later"], "'later' is not a number"),
    "seed_text": (["--seed", "x"], "invalid int value: 'x'"),
    "keep_trials_zero": (["--keep-trials", "0"], "argument --keep-trials: '0': keep at least 1"),
    "keep_trials_text": (["--keep-trials", "some"],
                         "argument --keep-trials: 'some': give 'all' or a number"),
}


@pytest.fixture
def results(tmp_path, monkeypatch):
    """A finished study in tmp/results, the lock kept under tmp, and the fault workload
    importable."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.syspath_prepend(str(TESTS))
    for name, (text, _) in SPACES.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    (tmp_path / "garbage.db").write_bytes(b"this is not a database" * 100)
    db = study_copy(tmp_path / "results")
    (tmp_path / "results" / "garbage").write_bytes(b"a file where a folder would go")
    return tmp_path, db


def run_search(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        rc = main(["search", *argv])
    except SystemExit as exc:        # argparse's own errors exit from inside parse_args
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("case", list(CASES))
def test_bad_search_input_is_one_line_exit_2_and_the_study_is_intact(results, capsys, case):
    tmp, db = results
    args, expect = CASES[case]
    args = [a.replace("{tmp}", str(tmp)) for a in args]
    before = sha256(db)
    rc, out, err = run_search([*args, "--results", str(tmp / "results")], capsys)
    assert rc == 2, err
    # a password typed in --storage is also warned about (docs/security.md), before the error
    lines = [line for line in err.strip().splitlines() if line != PASSWORD_WARNING]
    assert len(lines) == 1 and lines[0].startswith("autotune: error: "), err
    assert expect.replace("{tmp}", str(tmp)) in lines[0], lines[0]
    assert "Traceback" not in err and SECRET not in err + out
    assert sha256(db) == before
    assert not (tmp / "results" / "trials").exists()       # nothing was launched
    assert not (tmp / "elsewhere").exists() and not Path("/nonexistent").exists()


@pytest.mark.parametrize("sets, expect", [
    (["nproc=4096"], "--set: 4096 ranks on NUMA node 0 but it has only"),
    (["backend=nccl"], "--set: backend nccl not available here; found: gloo"),
    (["backend=mpi"], "--set: backend mpi not available here"),
])
def test_run_with_knobs_this_machine_lacks_is_bad_input(tmp_path, capsys, sets, expect):
    """What was typed cannot launch here: one line, exit 2, no trial folder (it used to be a
    trial outcome, exit 1, after a launch attempt)."""
    from autotune.probe import probe
    caps = probe().capabilities
    if any(s.startswith("backend=") and s.split("=")[1] in caps.backends for s in sets):
        pytest.skip("this machine has that backend")
    argv = ["run", "--results", str(tmp_path / "results")]
    for s in sets:
        argv += ["--set", s]
    for extra in ([], ["--dry-run"]):
        rc = main([*argv, *extra])
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1 and lines[0].startswith("autotune: error: "), err
        assert expect in lines[0] and "(on this machine)" in lines[0]
        assert not (tmp_path / "results").exists()


def test_run_with_more_dataloader_workers_than_a_rank_can_have_is_bad_input(tmp_path, capsys):
    """Issue 51 gave CPU trials DataLoader workers; `--set` beyond what the planner allows is
    refused as before: one line, exit 2, nothing launched. Unbound, a rank may have every CPU
    this process may use; bound, its own share (2 ranks of 1 thread: 1 core each here)."""
    from autotune.probe import probe
    topo = probe()
    cpus = len(topo.usable_cpus or topo.logical_cpus)
    cases = [([f"dataloader_workers={cpus + 1}"],
              f"dataloader_workers={cpus + 1}: more than the {cpus} CPU")]
    if topo.capabilities.taskset and topo.num_usable_cores() == 2:
        cases.append((["nproc=2", "threads=1", "binding=taskset", "dataloader_workers=2"],
                      "dataloader_workers=2: more than the 1 CPU a rank can have here"))
    for sets, expect in cases:
        argv = ["run", "--results", str(tmp_path / "results")]
        for item in sets:
            argv += ["--set", item]
        for extra in ([], ["--dry-run"]):
            rc = main([*argv, *extra])
            lines = capsys.readouterr().err.strip().splitlines()
            assert rc == 2 and len(lines) == 1 and expect in lines[0], lines
            assert not (tmp_path / "results").exists()


def test_debug_shows_the_traceback(results, capsys):
    tmp, _ = results
    rc, _, err = run_search(["--debug", "--budget", "10x"], capsys)
    assert rc == 2 and "Traceback" in err and "BudgetError" in err


def test_every_case_is_listed_in_bad_input_md():
    """tests/BAD_INPUT.md is the table users and reviewers read: a case tested here but missing
    there (or listed there under a name no test has) is a defect of the table."""
    from pathlib import Path
    table = (TESTS / "BAD_INPUT.md").read_text()
    missing = [case for case in CASES if f"[{case}]" not in table]
    assert not missing, f"cases missing from tests/BAD_INPUT.md: {missing}"


def test_ccl_where_it_is_not_built_is_one_line_with_the_fix(results, capsys, monkeypatch):
    """An empty build cache is a machine where setup.sh never built ccl: --set backend=ccl names
    why and the fix, exits 2, launches nothing and leaves the study as it was."""
    tmp, db = results
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp / "no-ccl-build"))
    before = sha256(db)
    for extra in ([], ["--dry-run"]):
        rc = main(["run", "--set", "backend=ccl", "--set", "nproc=2", "--results",
                   str(tmp / "results"), *extra])
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1 and "backend ccl not available here" in lines[0], err
        assert "fix: " in lines[0] and "autotune.comm.ccl" in lines[0]
    assert sha256(db) == before and not (tmp / "results" / "trials").exists()


@pytest.mark.parametrize("argv, expect", [
    (["run", "--set", "ccl_yield=spin", "--dry-run"], "ccl_yield='spin' is not valid; choose one of: sched_yield, pause, sleep"),
    (["run", "--set", "ccl_workers=0", "--dry-run"], "ccl_workers=0: must be an integer from 1 to 4"),
    (["run", "--set", "ccl_worker_affinity=core7", "--dry-run"], "choose one of: shared, dedicated"),
    (["compare", "--a", "ccl_workers=lots", "--b", "backend=gloo"], "ccl_workers='lots' must be an integer"),
])
def test_unknown_ccl_knob_values_are_one_line(results, capsys, argv, expect):
    tmp, db = results
    before = sha256(db)
    try:
        rc = main([*argv, "--results", str(tmp / "results")])
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and expect in lines[0], err
    assert sha256(db) == before and not (tmp / "results" / "trials").exists()
