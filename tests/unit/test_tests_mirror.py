"""The tests mirror the packages (tests/README.md): a folder of tests/unit/ for each package of
autotune/, and one of tests/benchmarks/ for each package of benchmarks/, and no folder for a
package that is gone. benchmarks/workloads/ holds what ranks run, not a benchmark: the trials of
tests/integration/ run it (test_user_workloads.py, test_script_mode_slow.py, test_feed_real.py)."""
from __future__ import annotations

import pytest
from paths import REPO


NOT_MIRRORED = {"workloads"}


def _packages(root):
    return {p.parent.name for p in root.glob("*/__init__.py")} - NOT_MIRRORED


def _folders(root):
    return {p.name for p in root.iterdir() if p.is_dir() and p.name != "__pycache__"}


@pytest.mark.parametrize("code, tests", [("autotune", "tests/unit"),
                                         ("benchmarks", "tests/benchmarks")])
def test_a_test_folder_per_package(code, tests):
    packages, folders = _packages(REPO / code), _folders(REPO / tests)
    assert packages - folders == set(), f"packages of {code}/ without a folder in {tests}/"
    assert folders - packages == set(), f"folders of {tests}/ for no package of {code}/"
