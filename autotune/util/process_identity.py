"""Which process is this, in a form another process can check later: is that exact one alive?

A pid alone is not enough: pids are reused, and the same pid names other processes in another
pid namespace (a container) or on another machine. A hostname is not enough either: containers
started from one image share it. So a process is named by (machine, pid, start time), where the
machine is the kernel's boot id and this pid namespace's inode: two processes can compare pids
only when both are equal (the same running kernel, the same pid numbering).

Ground floor: used by the runner (whose ranks carry their runner's mark) and by the study (whose
trials and workers record their owner).
"""
from __future__ import annotations

import functools
import os

import psutil

__all__ = ["RUNNER_ENV", "alive", "machine", "mark", "parse_mark"]

# In every rank's environment: the runner that started it (mark()), so a later search can tell
# a rank whose runner died (an orphan) from the live rank of a search running beside it.
RUNNER_ENV = "AUTOTUNE_RUNNER"


@functools.cache
def machine() -> str:
    """'<boot id>/<pid namespace inode>': equal exactly when pids here and there can be compared.
    Without /proc (not Linux) the hostname stands in, as it did before."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        return f"{boot}/{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        import socket
        return f"host:{socket.gethostname()}"


def _started(pid: int) -> float:
    return psutil.Process(pid).create_time()


def mark(pid: int | None = None) -> str:
    """This process (or `pid`, here) as '<machine> <pid> <start time>'."""
    pid = os.getpid() if pid is None else pid
    return f"{machine()} {pid} {_started(pid)!r}"


def parse_mark(text: str) -> tuple[str, int, float] | None:
    """(machine, pid, start time) of a mark, None when it is not one."""
    parts = text.split(" ")
    try:
        return (parts[0], int(parts[1]), float(parts[2])) if len(parts) == 3 else None
    except ValueError:
        return None


def alive(pid: int, started: float) -> bool:
    """Whether the process `pid` that started at `started` (seconds since the epoch, as psutil
    gives it) still runs on this machine; a zombie has finished, and the same pid with another
    start time is an unrelated process that reused it."""
    try:
        proc = psutil.Process(pid)
        return abs(proc.create_time() - started) < 1.0 and proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, ValueError, TypeError, OverflowError):
        return False
