"""A oneCCL rank whose pid a stale shared-memory segment already names moves to a fresh pid.

oneCCL's shm transport names each rank's segment `/dev/shm/<pid>:<n>:<m>` (comm/ccl/shm.py). A
segment left by a killed rank, on a host whose record of it is gone (another host of a multi-host
trial, a results folder deleted since, another user's container sharing /dev/shm), outlives its
process, and once the kernel hands its pid to a new rank, that rank fails in init_process_group
with "fi_enable(endpoint) fails with ret: -16, Device or resource busy". Seen here in 3 of about
30 ccl runs on a machine whose /dev/shm held 359 such segments; one candidate of a search lost 2
of its 3 verification rounds to it.

The segment cannot be removed from here: a live process of another pid namespace may own it. So
the rank forks before it imports torch, the child (a new pid) checks again and goes on as the
rank, and the parent stands in for it: it passes signals on and exits as the child did. Runs
first in `python -m autotune.worker`, only where the ccl shm transport is on (CCL_ATL_SHM=1).
"""
from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping

from ..comm.ccl.shm import named_for

_PASSED_ON = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
_TRIES = 1000            # then go on and let oneCCL say what it says


def ensure_fresh_pid(environ: Mapping[str, str] = os.environ) -> None:
    """Return in a process whose pid no oneCCL segment names: this one, or a forked child while
    this one stands in for it (one child at a time, never a chain). A child whose pid is named
    too exits without a word on the pipe, and another is forked; the rank's own exit code, any
    value, is never mistaken for that."""
    if environ.get("CCL_ATL_SHM") != "1":
        return
    stale = named_for(os.getpid())
    for _ in range(_TRIES if stale else 0):
        went_on, told = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(went_on)
            if named_for(os.getpid()):
                os._exit(0)
            os.write(told, b"1")
            os.close(told)
            print(f"[autotune worker] pid {os.getppid()} is named by a stale oneCCL segment "
                  f"(/dev/shm/{stale[0]}); the rank goes on as pid {os.getpid()}",
                  file=sys.stderr, flush=True)
            return
        os.close(told)
        previous = {signum: signal.signal(signum, lambda s, _frame: os.kill(child, s))
                    for signum in _PASSED_ON}
        with os.fdopen(went_on, "rb") as pipe:
            rank = pipe.read(1) == b"1"      # the child's word, or its end
        _, status = os.waitpid(child, 0)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if rank:
            _end_as(status)


def _end_as(status: int) -> None:
    """End this process as the child ended: its exit code, or its signal (never returns)."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    os._exit(os.waitstatus_to_exitcode(status))
