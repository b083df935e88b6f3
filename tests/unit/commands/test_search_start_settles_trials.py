"""A search's start settles its results folder (issue 34): trial folders beyond --keep-trials
are removed, and a oneCCL segment that a record says a dead rank of ours mapped (a runner killed
with kill -9) is removed from the real /dev/shm, while an unrecorded one stays. The whole
pipeline runs on a replayed landscape (as tests/unit/test_tune_replay.py), no processes."""
from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

from autotune.comm.ccl.shm import RECORD, _namespace
from autotune.tune import SearchRequest, search
from benchmarks.landscapes.synthetic import synthetic
from benchmarks.landscapes.table import SimClock

GONE = 4194305          # above any pid_max: a rank that no longer exists


def _search(tmp_path, monkeypatch, **req):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))   # the machine lock, kept here
    land, clock = synthetic("formula", seed=0), SimClock()
    return search(SearchRequest(budget_s=300.0, results=str(tmp_path / "results"), seed=0,
                                max_trials=2, **req),
                  label="cnn", topology=land.topology(), evaluate=land.evaluator(clock),
                  clock=clock)


def test_the_start_prunes_old_trial_folders_and_settles_ccl_records(tmp_path, monkeypatch):
    trials = tmp_path / "results" / "trials"
    for i in range(5):
        (trials / f"old-{i}").mkdir(parents=True)
        os.utime(trials / f"old-{i}", (1000 + i, 1000 + i))
    shm = Path("/dev/shm")
    mine, theirs = shm / f"{GONE}:0:0", shm / f"{GONE}:0:1"
    try:
        for path in (mine, theirs):
            path.write_bytes(b"\0" * 64)
        (trials / "old-4" / RECORD).write_text(json.dumps({**_namespace(), "segments": [
            {"name": mine.name, "ino": mine.stat().st_ino, "pid": GONE, "started": 1.0}]}))
        os.utime(trials / "old-4", (1004, 1004))
        _search(tmp_path, monkeypatch, keep_trials=2)
        assert not mine.exists() and theirs.exists()
    finally:
        mine.unlink(missing_ok=True)
        theirs.unlink(missing_ok=True)
    assert sorted(os.listdir(trials)) == ["old-3", "old-4"]


def test_keep_all_keeps_every_folder_and_a_new_results_folder_is_private(tmp_path, monkeypatch):
    _search(tmp_path, monkeypatch, keep_trials=None)
    results = tmp_path / "results"
    assert stat.S_IMODE(results.stat().st_mode) == 0o700
    assert stat.S_IMODE((results / "autotune.db").stat().st_mode) == 0o600
    trials = results / "trials"
    trials.mkdir()
    for i in range(3):
        (trials / f"old-{i}").mkdir()
    _search(tmp_path, monkeypatch, keep_trials=None)
    assert len(os.listdir(trials)) == 3
