"""worker/fresh_pid.py with real processes: a process whose pid a stale oneCCL segment names
forks, the child goes on, and the parent stands in for it: the child's exit code and a signal
sent to the parent's pid (what a launcher knows) reach the child and end the parent alike.
The end-to-end case, a real 2-rank ccl trial over such segments, is in test_ccl.py."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from paths import REPO

# names its own pid in /dev/shm (a stale segment's name), then asks for a fresh pid
PROGRAM = """
import os, sys, time
open(f"/dev/shm/{os.getpid()}:0:0", "x").close()
from autotune.worker.fresh_pid import ensure_fresh_pid
ensure_fresh_pid()
print(os.getpid(), flush=True)
if sys.argv[1] == "sleep":
    time.sleep(60)
sys.exit(int(sys.argv[1]))
"""


def _start(mode: str, env_extra: dict[str, str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), **env_extra}
    return subprocess.Popen([sys.executable, "-c", PROGRAM, mode], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _remove_stale(pid: int) -> None:
    try:
        os.unlink(f"/dev/shm/{pid}:0:0")
    except FileNotFoundError:
        pass


@pytest.mark.parametrize("code", [0, 7, 75])
def test_the_child_goes_on_under_a_new_pid_and_its_exit_code_is_the_processs(code):
    """Any exit code, 75 included (an earlier draft used it to mean "my pid is named too, fork
    again", which would have run such a rank twice): the rank runs once."""
    proc = _start(str(code), {"CCL_ATL_SHM": "1"})
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        _remove_stale(proc.pid)
    assert proc.returncode == code, err
    assert len(out.split()) == 1 and int(out.split()[0]) != proc.pid
    assert f"pid {proc.pid} is named by a stale oneCCL segment" in err


def test_a_signal_to_the_first_pid_reaches_the_rank_and_ends_both():
    proc = _start("sleep", {"CCL_ATL_SHM": "1"})
    try:
        child = int(proc.stdout.readline())
        assert child != proc.pid and psutil.Process(child).ppid() == proc.pid
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGTERM
        deadline = time.monotonic() + 10
        while psutil.pid_exists(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not psutil.pid_exists(child)
    finally:
        proc.kill()
        _remove_stale(proc.pid)


def test_without_the_shm_transport_nothing_moves():
    proc = _start("7", {"CCL_ATL_SHM": "0"})
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        _remove_stale(proc.pid)
    assert proc.returncode == 7 and int(out.split()[0]) == proc.pid and err == ""
