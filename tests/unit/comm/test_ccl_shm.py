"""oneCCL's segments of dead ranks are removed (a stale one under a reused pid fails the next
rank's init with "failed to initialize ATL"), live ones and other files are kept."""
from __future__ import annotations

import os
import subprocess
import sys

from autotune.comm.ccl.shm import remove_stale, stale


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_only_segments_of_processes_that_are_gone_are_stale():
    names = ["12:0:0", "12:0:1", "13:0:0", "__KMP_REGISTERED_LIB_12_0", "PostgreSQL.12", "x:0:0"]
    assert stale(names, alive=lambda pid: pid == 13) == ["12:0:0", "12:0:1"]


def test_remove_stale_removes_a_dead_ranks_segment_and_keeps_the_rest(tmp_path):
    dead, me = _dead_pid(), os.getpid()
    for name in (f"{dead}:0:0", f"{dead}:0:1", f"{me}:0:0", "__KMP_REGISTERED_LIB_1_0"):
        (tmp_path / name).write_bytes(b"\0" * 64)
    assert sorted(remove_stale(tmp_path)) == sorted([f"{dead}:0:0", f"{dead}:0:1"])
    assert sorted(os.listdir(tmp_path)) == sorted([f"{me}:0:0", "__KMP_REGISTERED_LIB_1_0"])
    assert remove_stale(tmp_path / "missing") == []


def test_the_kill_run_on_each_host_after_a_ccl_trial_removes_what_its_dead_ranks_left():
    """A trial across hosts ends with `python -m autotune.run.remote kill MARKER` on every host
    over ssh; for a ccl trial it also removes the segments its killed ranks left there (the
    runner does it only on this machine). Run here as ssh runs it: a real process."""
    from pathlib import Path
    from paths import REPO
    shm = Path("/dev/shm")
    dead, me = _dead_pid(), os.getpid()
    mine, theirs = shm / f"{me}:97:0", shm / f"{dead}:97:0"
    try:
        for path in (mine, theirs):
            path.write_bytes(b"\0" * 64)

        def kill(*extra: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "autotune.run.remote", "kill",
                                   "no-such-trial", *extra], cwd=REPO, capture_output=True,
                                  text=True, timeout=60)
        done = kill()
        assert done.returncode == 0 and done.stdout.strip() == "0" and theirs.exists()
        assert kill("--ccl").returncode == 0
        assert not theirs.exists() and mine.exists()
        bad = kill("--gloo")
        assert bad.returncode == 2 and "usage:" in bad.stderr
    finally:
        for path in (mine, theirs):
            path.unlink(missing_ok=True)
