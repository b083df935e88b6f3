"""setup.sh where users are (issue 35, item 2): its options refuse bad input in one line, and a
Python that already has torch >= 2.8 keeps it: the new .venv sees that environment's packages
(torch, and intel-openmp's libiomp5) instead of downloading torch again. Run for real on a copy
of the repository's tracked files; the Python is this test's own (which has torch)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paths import REPO


def _setup(folder: Path, *args: str, python: str = sys.executable, timeout: float = 600):
    env = {**os.environ, "PYTHON": python}
    return subprocess.run(["bash", str(folder / "setup.sh"), *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args, expect", [
    (["--bogus"], "unknown option '--bogus'; usage: ./setup.sh [--test] [--torch VERSION]"),
    (["--torch"], "--torch needs a version, e.g. --torch 2.15.0"),
    (["--torch", "2.7.1"], "--torch 2.7.1: autotune needs torch 2.8 or newer"),
    (["--torch", "latest"], "--torch 'latest': give a release such as 2.15.0"),
])
def test_bad_options_are_one_line_and_exit_2_before_anything_is_installed(tmp_path, args,
                                                                           expect):
    shutil.copy(REPO / "setup.sh", tmp_path / "setup.sh")
    done = _setup(tmp_path, *args)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [f"setup: error: {expect}"]
    assert not (tmp_path / ".venv").exists()


def _tracked_copy(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@pytest.mark.scenario
def test_a_python_with_torch_keeps_it_and_gets_intel_openmp(tmp_path):
    import torch
    repo = _tracked_copy(tmp_path / "clone")
    done = _setup(repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"setup: keeping torch {torch.__version__} from {sys.executable}" in done.stdout
    assert "installing torch" not in done.stdout
    assert done.stdout.strip().splitlines()[-1] == f"setup: ready (torch {torch.__version__})"
    py = repo / ".venv" / "bin" / "python"
    seen = subprocess.run([str(py), "-c", "import torch, autotune; from autotune.probe import "
                           "probe; print(torch.__file__); print(autotune.__file__); "
                           "print(sorted(probe().capabilities.omp_runtimes))"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert seen.returncode == 0, seen.stderr
    torch_file, autotune_file, omp = seen.stdout.strip().splitlines()
    assert torch_file == torch.__file__                       # the environment's own torch
    assert autotune_file.startswith(str(repo))                 # this copy, installed editable
    assert "libiomp5" in omp                                   # the knob's second choice
