"""How much of a trial's cores other processes took while it was timed (pure).

A trial's own CPU share (rank 0's CPU time over its threads' capacity) mixes two things: a
configuration that oversubscribes its own cores (2 namespace hosts sharing 2 cores showed 0.49 on
every trial), and another process taking the cores. Only the second makes a measurement
untrustworthy, so it is measured apart: the runner samples the busy time of the trial's cores
(/proc/stat, every process) and the CPU time of the trial's own process tree (and of the runner
watching it); what the cores spent beyond the tree went to processes outside it.

`DISTURBED_SHARE` is the one threshold: a measurement whose cores lost more than this share to
other processes is disturbed. The search re-measures such a trial once when the budget allows,
verification reports it, and none is trusted alone.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# Over this share of the trial cores' capacity taken by other processes, a measurement is
# disturbed. The runner's own polling and the kernel's housekeeping stay near 1-2% on 2 cores;
# a one-core hog on 2 cores is 50%.
DISTURBED_SHARE = 0.10
# /proc/stat fields counted as busy: user nice system (idle iowait) irq softirq steal; guest
# time is already inside user.
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)


@dataclass(frozen=True, kw_only=True)
class CpuSample:
    """One look at the trial's cores, taken by the runner while the trial runs."""
    at: float        # time.time()
    busy_s: float    # CPU seconds the trial's cores have been busy, every process counted
    tree_s: float    # CPU seconds of the trial's own processes and the runner watching them


@dataclass(frozen=True, kw_only=True)
class Contention:
    """Shares of the trial cores' capacity (seconds x cores) over the timed window."""
    own_share: float        # used by the trial's own processes
    outside_share: float    # taken by processes outside the trial's process tree
    seconds: float          # the span the samples cover

    @property
    def disturbed(self) -> bool:
        return disturbed(self.outside_share)


def busy_seconds(proc_stat: str, cpus: Iterable[int], clk_tck: int) -> float:
    """Busy CPU seconds since boot of `cpus`, from the text of /proc/stat."""
    wanted = {f"cpu{c}" for c in cpus}
    total = 0
    for line in proc_stat.splitlines():
        parts = line.split()
        if parts and parts[0] in wanted:
            values = [int(v) for v in parts[1:]]
            total += sum(values[i] for i in _BUSY_FIELDS if i < len(values))
    return total / clk_tck


def contention(samples: Sequence[CpuSample], start: float, end: float,
               num_cpus: int) -> Contention | None:
    """Contention over [start, end] (time.time()), from the samples bracketing it; None when
    the samples cannot cover it (fewer than two, or a span under half a second)."""
    if num_cpus < 1 or len(samples) < 2 or end <= start:
        return None
    before = [s for s in samples if s.at <= start]
    after = [s for s in samples if s.at >= end]
    s0 = before[-1] if before else samples[0]
    s1 = after[0] if after else samples[-1]
    span = s1.at - s0.at
    if span < 0.5:
        return None
    capacity = span * num_cpus
    own = max(0.0, s1.tree_s - s0.tree_s)
    outside = max(0.0, (s1.busy_s - s0.busy_s) - own)
    return Contention(own_share=min(1.0, own / capacity), outside_share=min(1.0, outside / capacity),
                      seconds=span)


def disturbed(outside_share: float | None) -> bool:
    """Whether other processes took enough of the trial's cores to distrust its measurement
    (None: not measured, e.g. a run across hosts, or a study from before this was recorded)."""
    return outside_share is not None and outside_share > DISTURBED_SHARE


def describe_outside(outside_share: float) -> str:
    return f"other processes took {outside_share:.0%} of the trial cores"
