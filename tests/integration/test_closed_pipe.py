"""`autotune export --format json | head -1` printed a BrokenPipeError traceback when the output
outgrew the pipe before `head` left (issue 35): every command stops quietly when its reader is
gone, as Unix tools do (exit 141, as a shell reports a writer killed by SIGPIPE)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from paths import REPO
from results_study import study_copy


def _run_into_closed_pipe(argv: list[str], cwd) -> subprocess.CompletedProcess:
    """The command's stdout is a pipe whose reader has already left: its first write fails."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "autotune", *argv], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, cwd=cwd, timeout=120)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("argv", [["export", "--format", "json"], ["export", "--format", "shell"],
                                  ["report"], ["report", "--json"], ["probe"]])
def test_a_reader_that_left_ends_the_command_quietly(tmp_path, argv):
    study_copy(tmp_path / "results")
    extra = [] if argv == ["probe"] else ["--results", str(tmp_path / "results")]
    done = _run_into_closed_pipe([*argv, *extra], tmp_path)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr
    assert done.returncode == 141, done.stderr


def test_head_1_of_a_long_output_gets_its_line_and_no_traceback(tmp_path):
    """The user's own pipeline: `head -1` reads one line and leaves while autotune still writes."""
    study_copy(tmp_path / "results")
    done = subprocess.run(["bash", "-c", f"{sys.executable} -m autotune report --json "
                           f"--results {tmp_path / 'results'} | head -1"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0 and done.stdout.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
