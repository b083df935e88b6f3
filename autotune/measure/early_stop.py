"""When a trial is losing: the decision to stop it after its first timed windows (pure).

Multi-fidelity in the Hyperband sense (Li et al., JMLR 18(185) 2018): a configuration that is
clearly slower than the leader after a few windows need not run its whole window, because no
amount of further measurement makes it the answer. "Clearly" means beyond the noise: the upper
bound of its throughput (the windows' mean, plus z standard errors of that mean, plus the
run-to-run noise that more windows of the same run cannot average away) is below the share of
the leader the search is after (95%: a configuration that cannot reach it is not a result).

What a stopped trial may and may not be used for:
- its throughput is an estimate from fewer windows and is recorded as such (the reason says how
  many windows and the bound), so it can rank below the leader but never lead or be recommended:
  by construction it is below 95% of the leader, and the search only measures the quality of,
  and verifies, configurations within 3% of it;
- the accuracy side never sees it: quality is measured by separate seeded runs per math class
  (quality/evidence.py), and an accuracy a script prints after a shortened run (fewer steps) must
  be discarded, not counted against its class.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True, kw_only=True)
class StopRule:
    min_windows: int = 2        # never judge on one window (warm caches, a late JIT)
    target: float = 0.95        # share of the leader a configuration must be able to reach
    z: float = 2.0              # standard errors of the windows' mean
    run_noise: float = 0.03     # relative run-to-run noise (same config, two launches)

    def __post_init__(self) -> None:
        if self.min_windows < 1:
            raise ValueError(f"min_windows={self.min_windows}: must be at least 1")
        if not 0 < self.target <= 1:
            raise ValueError(f"target={self.target}: must be in (0, 1]")
        if self.z < 0 or self.run_noise < 0:
            raise ValueError("z and run_noise must be >= 0")


@dataclass(frozen=True, kw_only=True)
class StopDecision:
    stop: bool
    windows: int
    upper: float        # the throughput this trial could still have (samples/s); inf: unknown
    bound: float        # what it must reach: target x leader
    reason: str


def losing(windows: Sequence[float], leader: float | None,
           rule: StopRule = StopRule()) -> StopDecision:
    """Whether a trial whose timed windows so far gave `windows` (samples/s each) should stop,
    with `leader` the best throughput measured in the study (None or 0: nothing to lose to)."""
    k = len(windows)
    bound = rule.target * leader if leader else 0.0
    if k < rule.min_windows or not leader:
        return StopDecision(stop=False, windows=k, upper=math.inf, bound=bound,
                            reason="too few windows" if leader else "no leader yet")
    mean = statistics.fmean(windows)
    sem = statistics.stdev(windows) / math.sqrt(k) if k > 1 else 0.0
    upper = mean + rule.z * sem + rule.run_noise * mean
    stop = upper < bound
    verb = "below" if stop else "not below"
    return StopDecision(stop=stop, windows=k, upper=upper, bound=bound,
                        reason=f"stopped early after {k} windows: at most {upper:.1f}/s, "
                               f"{verb} {rule.target:.0%} of the leader's {leader:.1f}/s"
                        if stop else f"{k} windows: at most {upper:.1f}/s, {verb} "
                                     f"{rule.target:.0%} of the leader's {leader:.1f}/s")
