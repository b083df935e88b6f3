"""Interrupting a real `autotune search` (issue 7): Ctrl-C, SIGTERM, kill -9 at random moments,
two searches on one storage, and the per-machine lock.

The searches run tests/fault_workload.py on a small space (search_harness.SPACE); a config mapped
to `hang_collective` gives a trial that is reliably running when the signal arrives.
"""
from __future__ import annotations

import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from optuna.trial import TrialState

from search_harness import (REPO, fault_log, load_study, search_argv, search_env, start_search,
                            survivors, wait_for, write_space)

slow = pytest.mark.slow

HANG = {4: {1: "hang_collective"}}


def hanging(tmp) -> bool:
    return any(e["fault"] == "hang_collective" for e in fault_log(tmp))


def measured(study) -> dict[str, int]:
    """config key -> trial number, for every completed measurement (repeats excluded)."""
    return {t.user_attrs["config_key"]: t.number for t in study.get_trials(deepcopy=False)
            if t.state == TrialState.COMPLETE and t.user_attrs.get("role") != "repeat"}


def report_ok(tmp) -> None:
    out = subprocess.run([sys.executable, "-m", "autotune", "report", "--results",
                          str(tmp / "results")], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr


def running_trials(tmp) -> list:
    try:
        return [t for t in load_study(tmp).trials if t.state == TrialState.RUNNING]
    except Exception:  # noqa: BLE001 - the study may not exist yet
        return []


def integrity(tmp) -> str:
    con = sqlite3.connect(tmp / "results" / "autotune.db")
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


@slow
@pytest.mark.scenario
def test_sigint_then_sigterm_mid_trial_then_resume_without_rerunning(tmp_path):
    space = write_space(tmp_path, [2, 3, 4])
    runs = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        (tmp_path / "faults.jsonl").unlink(missing_ok=True)
        proc = start_search(tmp_path, space, HANG)
        wait_for(lambda: hanging(tmp_path), 120, "the hanging trial", proc)
        sent = time.monotonic()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
        assert proc.returncode == 130, err[-2000:]
        last = err.strip().splitlines()[-1]
        assert last.startswith("autotune: interrupted") and "completed trials are kept in " \
            "sqlite:///" in last and "Run the same command to resume." in last, last
        assert "Traceback" not in err
        assert took < 5 + 3, took                    # grace period plus slack
        assert survivors(tmp_path) == []
        study = load_study(tmp_path)
        stopped = [t for t in study.trials if t.state == TrialState.FAIL]
        assert stopped and stopped[-1].user_attrs["outcome"] == "interrupted"
        assert stopped[-1].user_attrs["config"]["kmp_blocktime"] == 4
        runs.append(measured(study))
    assert runs[0].items() <= runs[1].items()        # nothing completed was lost
    assert len(runs[0]) >= 2                          # at least the two references

    (tmp_path / "faults.jsonl").unlink(missing_ok=True)
    proc = start_search(tmp_path, space, {})          # the hang is fixed: resume to the end
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert not re.search(r"\] trial \d+ \(reference:", err)   # measured before: not re-run
    final = measured(load_study(tmp_path))
    assert runs[1].items() <= final.items()
    study = load_study(tmp_path)
    keys = [t.user_attrs["config_key"] for t in study.trials
            if t.state == TrialState.COMPLETE and t.user_attrs.get("role") != "repeat"]
    assert len(keys) == len(set(keys)) == 5          # 2 references + 3 configs, each once
    assert survivors(tmp_path) == []


@slow
@pytest.mark.scenario
def test_kill_9_at_random_moments_never_loses_a_completed_trial(tmp_path):
    space = write_space(tmp_path, [2, 3, 4, 5])
    rng = random.Random(7)
    kept: dict[str, int] = {}
    stale_seen = 0
    for i in range(5):
        proc = start_search(tmp_path, space, HANG)
        if i < 4:
            time.sleep(rng.uniform(3.0, 20.0))
        else:   # on a loaded box all four may land in the references: make sure one hits a trial
            wait_for(lambda: running_trials(tmp_path), 180, "a running search trial", proc)
            time.sleep(rng.uniform(0.0, 3.0))
        proc.kill()                                   # kill -9: no cleanup at all
        _, err = proc.communicate(timeout=30)
        stale_seen += "left running by a killed search" in err
        if not (tmp_path / "results" / "autotune.db").exists():
            continue                                  # killed before it created the study
        try:
            now = measured(load_study(tmp_path))
        except ValueError:                            # killed before the study was created in it
            assert not kept
            continue
        assert kept.items() <= now.items(), f"kill {i} lost {set(kept) - set(now)}"
        kept = now
        assert integrity(tmp_path) == "ok"
        if kept:
            report_ok(tmp_path)
    # the next search reaps the orphaned ranks, fails the RUNNING trial and carries on
    running = [t for t in load_study(tmp_path).trials if t.state == TrialState.RUNNING]
    proc = start_search(tmp_path, space, {})
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    study = load_study(tmp_path)
    for t in running:
        t2 = study.trials[t.number]
        assert t2.state == TrialState.FAIL and t2.user_attrs["outcome"] == "interrupted"
    if running:
        assert "recovered" in err and "left running by a killed search" in err
    assert stale_seen + len(running) >= 1
    assert kept.items() <= measured(study).items()
    assert survivors(tmp_path) == []
    report_ok(tmp_path)


@slow
def test_second_search_on_the_machine_is_refused_naming_the_holder(tmp_path):
    space = write_space(tmp_path, [2, 4])
    first = start_search(tmp_path, space, HANG)
    try:
        wait_for(lambda: (tmp_path / "results" / "autotune.db").exists(), 60, "the study",
                 first)
        db = tmp_path / "results" / "autotune.db"
        # the per-user lock folder under TMPDIR (issue 34: never a file straight in /tmp)
        locks = tmp_path / f"autotune-{os.getuid()}"
        wait_for(lambda: list(locks.glob("autotune-*.lock")), 30, "the lock", first)
        second = subprocess.run(search_argv(tmp_path, space), cwd=REPO,
                                env=search_env(tmp_path), capture_output=True, text=True,
                                timeout=60)
        assert second.returncode == 2
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert lines[0].startswith("autotune: error: another autotune search is running on "
                                   f"this machine (pid {first.pid} (")   # user: command, since
        assert "--allow-concurrent" in lines[0]
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=30)
    assert survivors(tmp_path) == []


@slow
@pytest.mark.scenario
def test_two_searches_on_one_storage_do_not_corrupt_it(tmp_path):
    # The same study from two shells, the second with --allow-concurrent, started while the
    # first is inside a search trial: both write trials and study attributes into one SQLite
    # file at once, and the second must not take the first's live trial for a killed one.
    space = write_space(tmp_path, [2, 3])
    a = start_search(tmp_path, space, {})
    wait_for(lambda: running_trials(tmp_path), 120, "a running search trial", a)
    b = start_search(tmp_path, space, {}, "--allow-concurrent")
    (out_a, err_a), (out_b, err_b) = a.communicate(timeout=400), b.communicate(timeout=400)
    assert a.returncode == 0, err_a[-3000:]
    assert b.returncode == 0, err_b[-3000:]
    assert integrity(tmp_path) == "ok"
    study = load_study(tmp_path)
    assert not [t for t in study.trials if t.state == TrialState.RUNNING]
    assert not [t for t in study.trials if t.state == TrialState.FAIL]   # neither failed the other's
    assert {t.user_attrs["config"]["kmp_blocktime"] for t in study.trials
            if t.user_attrs.get("role") == "search"} == {2, 3}
    report_ok(tmp_path)
    assert survivors(tmp_path) == []


def test_fail_stale_running_spares_live_searches_and_fails_dead_ones(tmp_path):
    import optuna

    from autotune.study.storage import open_storage, open_study, storage_of, trial_id
    from autotune.study.owners import claim_trial, fail_stale_running
    study = open_study(open_storage(f"sqlite:///{tmp_path / 'x.db'}"), "autotune-x")
    storage = storage_of(study)
    mine = study.ask()
    claim_trial(study, mine)                               # this (live) process
    dead = study.ask()
    claim_trial(study, dead)
    storage.set_trial_system_attr(trial_id(study, dead.number), "autotune:owner",
                                  {**study.trials[dead.number].system_attrs[
                                      "autotune:owner"], "pid": 2 ** 22 + 1})
    reused = study.ask()                                   # live pid, other start time
    claim_trial(study, reused)
    owner = study.trials[reused.number].system_attrs["autotune:owner"]
    storage.set_trial_system_attr(trial_id(study, reused.number), "autotune:owner",
                                  {**owner, "started": owner["started"] - 100})
    elsewhere = study.ask()
    storage.set_trial_system_attr(trial_id(study, elsewhere.number), "autotune:owner",
                                  {**owner, "host": "another-host"})
    fresh = study.ask()                                    # unclaimed for a moment: spared
    assert fail_stale_running(study) == 2
    states = {t.number: t.state for t in study.trials}
    assert states[dead.number] == states[reused.number] == optuna.trial.TrialState.FAIL
    assert {states[n] for n in (mine.number, elsewhere.number, fresh.number)} == {
        optuna.trial.TrialState.RUNNING}
    assert study.trials[dead.number].user_attrs["outcome"] == "interrupted"
