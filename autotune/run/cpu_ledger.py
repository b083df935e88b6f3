"""The runner's look at a trial's cores while it runs: busy time of the cores (/proc/stat) and CPU
time of the trial's own processes, sampled now and then (measure/contention.py turns the samples
into shares of the timed window).

A process of the trial that exits between two looks takes its last stretch of CPU with it, and
one that lives less than a look is never seen at all. Yet its parent, once it has reaped it,
carries all of its CPU time (children_user and children_system). So each process counts its own
time and its reaped children's. A reaped process then counts nothing, as long as its parent
still runs and is the trial's. Before this, a compiled launch's short first window often read
"other processes took 11-14% of the trial cores" on a quiet machine: torch.compile's worker
processes exited unsampled, and the search re-measured 3-4 such trials in a 10-minute search."""
from __future__ import annotations

import os
import time
from collections.abc import Iterable

import psutil

from ..measure.contention import CpuSample, busy_seconds
from ..plan.launch_plan import LaunchPlan

# Often enough to bracket a 1-2 s timed window; each look costs well under a millisecond.
INTERVAL_S = 0.5
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def trial_cpus(plan: LaunchPlan) -> tuple[int, ...]:
    """The cores the trial runs on: its ranks' bindings, or all this process may use."""
    if plan.ranks and all(r.cpus for r in plan.ranks):
        return tuple(sorted({c for r in plan.ranks for c in r.cpus or ()}))
    return tuple(sorted(os.sched_getaffinity(0)))


class CpuLedger:
    def __init__(self, cpus: tuple[int, ...]) -> None:
        self.cpus = cpus
        self.samples: list[CpuSample] = []
        # the latest CPU seconds of every process seen: its own, and its reaped children's
        self.cpu_of: dict[int, float] = {}
        self.parent_of: dict[int, int] = {}  # the parent each process had when first seen
        self.held: set[int] = set()          # exited, their time held by a parent of the trial
        self.me = psutil.Process()           # the runner: its polling is the trial's, not load
        self.looked_at = 0.0

    def sample(self, procs: Iterable[psutil.Process], *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.looked_at < INTERVAL_S:
            return
        self.looked_at = now
        self._look(self.me, with_children=False)   # its children include other launches
        # parents come before their children here (processes.Processes.tracked), so a child
        # reaped between the two looks is seen gone, and its parent is looked at again
        gone = [p.pid for p in procs if not self._look(p, with_children=True)]
        for pid in gone:
            if pid in self.held:
                continue      # its parent's time holds it since an earlier look
            parent = self.parent_of.get(pid)
            if parent in self.cpu_of and parent != self.me.pid and (alive := _live(parent)) \
                    and self._look(alive, with_children=True):
                # reaped by a process of the trial, whose children's time now holds all of it
                self.cpu_of[pid] = 0.0
                self.held.add(pid)
        try:
            with open("/proc/stat", encoding="ascii") as f:
                stat = f.read()
        except OSError:
            return
        self.samples.append(CpuSample(at=time.time(), busy_s=busy_seconds(stat, self.cpus, _CLK_TCK),
                                      tree_s=sum(self.cpu_of.values())))

    def _look(self, p: psutil.Process, *, with_children: bool) -> bool:
        """Record `p`'s CPU seconds; False when it has exited (its last look then stands)."""
        try:
            with p.oneshot():
                t = p.cpu_times()
                if p.pid not in self.parent_of:
                    self.parent_of[p.pid] = p.ppid()
        except psutil.Error:
            return False
        used = t.user + t.system + (t.children_user + t.children_system if with_children else 0.0)
        self.cpu_of[p.pid] = max(self.cpu_of.get(p.pid, 0.0), used)
        return True


def _live(pid: int) -> psutil.Process | None:
    """`pid`'s process while it runs (None: gone, or a zombie, which reaps nothing)."""
    try:
        p = psutil.Process(pid)
        return p if p.status() != psutil.STATUS_ZOMBIE else None
    except psutil.Error:
        return None
