"""A rank across hosts ends when the runner's end of its launch closes (util/channel
LIFELINE_ENV). Across hosts the runner's death reaches no rank by itself: PDEATHSIG is a parent's
on one machine, and killing an ssh client does not reach what it started on the other side. A
rank kept alive between windows would then wait for its next request for up to `serve_s`, and
one in a window would train on. So the runner holds each launcher's stdin open (ssh forwards it
over the connection, srun to every task, mpirun to rank 0) and never writes to it: end of file
there means the runner, its launcher or the connection is gone, and the rank ends at once. Under
mpirun the other ranks' stdin is /dev/null, not a lifeline; rank 0's exit makes mpirun end them.
"""
from __future__ import annotations

import os
import stat
import sys
import threading

from ..comm.ccl.shm import remove_own
from ..plan.launch_plan import EXIT_LIFELINE
from ..util.channel import LIFELINE_ENV


def is_lifeline(fd: int = 0) -> bool:
    """Whether `fd` can carry the runner's end: a pipe or a socket (a terminal, a file or
    /dev/null cannot)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def hold(rank: int, env: dict[str, str] | None = None) -> bool:
    """Watch stdin in a thread when the launch asks for it and stdin can carry it; returns
    whether it is watched."""
    env = dict(os.environ) if env is None else env
    if not env.get(LIFELINE_ENV) or not is_lifeline(0):
        return False
    threading.Thread(target=_wait_for_end, args=(rank,), name="autotune-lifeline",
                     daemon=True).start()
    return True


def _wait_for_end(rank: int) -> None:
    try:
        while os.read(0, 4096):   # nothing is ever sent: what comes is dropped
            pass
    except OSError:
        pass
    print(f"[autotune worker rank {rank}] the runner's end of this launch closed (the runner, "
          "its launcher or the connection is gone): ending", file=sys.stderr, flush=True)
    remove_own()
    os._exit(EXIT_LIFELINE)
