"""oneCCL's shared-memory segments that outlive their ranks, and their removal (an edge).

oneCCL's shm transport (`CCL_ATL_SHM=1`, which the plan sets) creates `/dev/shm/<pid>:<n>:<m>`
for each rank, 64 MB each, and removes them only when the rank exits cleanly. A rank that is
killed (a timeout, a teardown, Ctrl-C) leaves them behind. With pid_max at 32768 the kernel soon
gives a later rank the same pid, and oneCCL then fails in init_process_group with "failed to
initialize ATL": reproduced here by starting a rank over a stale segment of its own pid (it fails
every time), and seen as a random ccl test failure once a day of tests had left 905 segments
(7.7 GB of /dev/shm). The runner removes the segments of dead processes before and after every
ccl trial it runs on this host.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Iterable

import psutil

SHM = Path("/dev/shm")
_SEGMENT = re.compile(r"^(\d+):\d+:\d+$")


def stale(names: Iterable[str], alive: Callable[[int], bool] = psutil.pid_exists) -> list[str]:
    """The names that are oneCCL segments of processes that no longer exist."""
    out = []
    for name in names:
        m = _SEGMENT.match(name)
        if m and not alive(int(m.group(1))):
            out.append(name)
    return out


def remove_stale(root: Path = SHM) -> list[str]:
    """Remove this user's stale oneCCL segments under `root`; returns the names removed."""
    try:
        names = os.listdir(root)
    except OSError:
        return []
    gone = []
    for name in stale(names):
        path = root / name
        try:
            if path.stat().st_uid != os.getuid():
                continue
            path.unlink()
            gone.append(name)
        except OSError:     # removed meanwhile, or not ours to remove
            continue
    return gone
