"""The runner's look at a trial's cores while it runs: busy time of the cores (/proc/stat) and CPU
time of the trial's own processes, sampled now and then (measure/contention.py turns the samples
into shares of the timed window)."""
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
        self.cpu_of: dict[int, float] = {}   # the latest CPU seconds of every process seen
        self.me = psutil.Process()           # the runner: its polling is the trial's, not load
        self.looked_at = 0.0

    def sample(self, procs: Iterable[psutil.Process], *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.looked_at < INTERVAL_S:
            return
        self.looked_at = now
        for p in (self.me, *procs):
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue      # exited: its last sample stands (only a partial interval is lost)
            self.cpu_of[p.pid] = max(self.cpu_of.get(p.pid, 0.0), t.user + t.system)
        try:
            with open("/proc/stat", encoding="ascii") as f:
                stat = f.read()
        except OSError:
            return
        self.samples.append(CpuSample(at=time.time(), busy_s=busy_seconds(stat, self.cpus, _CLK_TCK),
                                      tree_s=sum(self.cpu_of.values())))
