"""Ranks stuck after training, told apart from ranks still working.

Once one rank has exited cleanly, the job's collectives are over: a rank that then shows no CPU use
and writes no output for a deadline is stuck (gloo's `destroy_process_group` waiting on a peer that
is gone is the common case), not working. A rank still computing, say rank 0 writing a checkpoint
after the others left, uses CPU and is left alone. The runner watches trials and launches alike
with `IdleWatch` and ends what it reports.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable

import psutil

from .processes import cpu_seconds

# Long enough for a checkpoint written to a slow disk (that shows as output or CPU, or both, in
# less than this); short enough that a hung teardown does not hold a launch or a trial for minutes.
IDLE_DEADLINE_S = 30.0
_CHECK_S = 1.0
# CPU seconds per second below which a rank counts as idle: a Python waiting on a socket wakes
# now and then (gloo's keep-alives, GC), far below this; any computing thread is far above.
_IDLE_CPU_RATE = 0.02


@dataclass(frozen=True, kw_only=True)
class Stuck:
    """A rank ended because it sat idle after another rank had exited cleanly."""
    rank: int
    idle_s: float
    after_rank: int      # the rank whose clean exit started the watch
    where: str = ""      # the kernel function it sat in (/proc/<pid>/wchan); "" when unreadable

    @property
    def message(self) -> str:
        sat = f" (it sat in {self.where})" if self.where else ""
        return (f"rank {self.rank} idle for {self.idle_s:.0f} s after rank {self.after_rank} "
                f"exited; ended{sat}")


def where_waiting(pid: int) -> str:
    """The kernel functions the process's threads sleep in, most common first (wchan)."""
    counts: dict[str, int] = {}
    try:
        tids = [t.id for t in psutil.Process(pid).threads()]
    except psutil.Error:
        tids = [pid]
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/wchan", encoding="ascii", errors="replace") as f:
                name = f.read().strip()
        except OSError:
            continue
        if name and name != "0":
            counts[name] = counts.get(name, 0) + 1
    ranked = sorted(counts, key=lambda n: -counts[n])
    return ", ".join(f"{n} x{counts[n]}" if counts[n] > 1 else n for n in ranked[:3])


def _tree_cpu(pid: int) -> float | None:
    """CPU seconds of a rank and every live descendant (None: it is gone)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    return cpu_seconds(procs)


def _size(log: "str | Callable[[], int]") -> int:
    """A log's size: by its path (a launch's), or as the trial's folder says (run/trial_files)."""
    if callable(log):
        return log()
    try:
        return os.path.getsize(log)
    except OSError:
        return -1


class IdleWatch:
    """Per rank: when it last used CPU or wrote output. `check` returns the ranks stuck now."""

    def __init__(self, pids: list[int], logs: "list[str] | list[Callable[[], int]]",
                 deadline_s: float = IDLE_DEADLINE_S):
        self.pids, self.logs, self.deadline_s = pids, logs, deadline_s
        self.active_at = [time.monotonic()] * len(pids)
        self.last = [(_tree_cpu(p), _size(log)) for p, log in zip(pids, logs)]
        self.checked_at = 0.0
        self.reported: set[int] = set()

    def check(self, codes: list[int | None], exit_order: list[int]) -> list[Stuck]:
        now = time.monotonic()
        if self.deadline_s <= 0 or now - self.checked_at < _CHECK_S:
            return []
        elapsed = now - self.checked_at if self.checked_at else _CHECK_S
        self.checked_at = now
        clean = [r for r in exit_order if codes[r] == 0]
        stuck = []
        for r, pid in enumerate(self.pids):
            if codes[r] is not None or r in self.reported:
                continue
            sample = (_tree_cpu(pid), _size(self.logs[r]))
            (cpu0, out0), (cpu1, out1) = self.last[r], sample
            self.last[r] = sample
            busy = (cpu0 is None or cpu1 is None or (cpu1 - cpu0) / elapsed > _IDLE_CPU_RATE
                    or out1 != out0)
            if busy or not clean:
                self.active_at[r] = now
                continue
            idle = now - self.active_at[r]
            if idle >= self.deadline_s:
                self.reported.add(r)
                stuck.append(Stuck(rank=r, idle_s=idle, after_rank=clean[0],
                                   where=where_waiting(pid)))
        return stuck
