"""trials/ under the results folder is kept to the newest N folders (issue 34: it was never
pruned); a folder a oneCCL record still needs, or a symlink, stays (real files, no processes;
a live trial's folder is kept in tests/integration/test_shared_machine.py)."""
from __future__ import annotations

import os
import sys

import pytest

from autotune.cli import main
from autotune.comm.ccl.shm import RECORD
from autotune.run.trials_dir import check_results, prune


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


@pytest.mark.parametrize("command", ["run", "search"])
@pytest.mark.parametrize("linked", ["results", "above", "trials"])
def test_a_results_folder_reached_through_a_link_is_refused_in_one_line(tmp_path, capsys,
                                                                         command, linked):
    """A --results reached through a symbolic link passed the check and then failed every
    trial with a ValueError (issue 61): the runner and the ranks reach a trial's files by the
    real path they walked to. Now: one line naming the link, its target and the real folder to
    give instead; exit 2; nothing written."""
    real = tmp_path / "real"
    (real / "results").mkdir(parents=True)
    if linked == "results":
        (tmp_path / "link").symlink_to(real / "results")
        given, link, fix = tmp_path / "link", tmp_path / "link", real / "results"
    elif linked == "above":
        (tmp_path / "link").symlink_to("real")
        given, link, fix = tmp_path / "link" / "results", tmp_path / "link", real / "results"
    else:   # its trials folder a link to another folder of the user's
        (tmp_path / "elsewhere").mkdir()
        (real / "results" / "trials").symlink_to(tmp_path / "elsewhere")
        given, link, fix = real / "results", real / "results" / "trials", None
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    argv = ["--results", str(given), "--seconds", "1"]
    argv += ["--budget", "1m"] if command == "search" else ["--", sys.executable, "-c", "pass"]
    assert main([command, *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    target = os.readlink(link)
    assert err[0].startswith(f"autotune: error: --results {given}: {link} is a symbolic link "
                             f"(to {target}); a trial's files are reached by their real path "
                             "only: "), err
    assert err[0].endswith(f"give --results {fix}, the real folder; nothing was written"
                           if fix else "put a folder in its place; nothing was written"), err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    if fix:   # the real folder given instead passes the check
        check_results(str(fix))
