"""trials/ under the results folder is kept to the newest N folders (issue 34: it was never
pruned); a folder a oneCCL record still needs, or a symlink, stays (real files, no processes;
a live trial's folder is kept in tests/integration/test_shared_machine.py)."""
from __future__ import annotations

import os

from autotune.comm.ccl.shm import RECORD
from autotune.run.trials_dir import prune


def _trials(root, n):
    for i in range(n):
        folder = root / f"2026-{i:02d}"
        folder.mkdir(parents=True)
        (folder / "rank0.log").write_text("x")
        os.utime(folder, (1000 + i, 1000 + i))   # 2026-00 is the oldest
    return root


def test_only_the_newest_n_trial_folders_are_kept(tmp_path):
    trials = _trials(tmp_path / "trials", 5)
    assert sorted(prune(str(trials), 2)) == ["2026-00", "2026-01", "2026-02"]
    assert sorted(os.listdir(trials)) == ["2026-03", "2026-04"]
    assert prune(str(trials), 2) == []


def test_keep_all_removes_nothing(tmp_path):
    trials = _trials(tmp_path / "trials", 3)
    assert prune(str(trials), None) == [] and len(os.listdir(trials)) == 3
    assert prune(str(tmp_path / "missing"), 1) == []


def test_a_record_of_unsettled_segments_or_a_symlink_is_kept(tmp_path):
    trials = _trials(tmp_path / "trials", 3)
    (trials / "2026-00" / RECORD).write_text("{}")
    os.utime(trials / "2026-00", (1000, 1000))
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "data").write_text("keep me")
    os.symlink(outside, trials / "2025-link")
    assert prune(str(trials), 1) == ["2026-01"]
    assert (outside / "data").read_text() == "keep me"
    assert sorted(os.listdir(trials)) == ["2025-link", "2026-00", "2026-02"]
