"""Whether a verified ratio is settled enough to headline (pure).

A loaded machine measured 6.7, 3.1 and 1.26 in three verification rounds and the tool still said
"3.11x (±1.37)"; a quiet re-run gave 2.37x. So verification goes on, round after round, until the
ratio's confidence interval is narrow (SETTLED_HALF_WIDTH of the ratio) or its share of the budget
runs out, and a figure is headlined only when settled. Rounds in which other processes took the
trial cores (measure/contention.py) do not count towards settling: a ratio measured under load
says as much about the load as about the configuration.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..measure.contention import describe_outside, disturbed

# Settled: the 95% interval of the ratio lies within ±10% of it.
SETTLED_HALF_WIDTH = 0.10
# The most rounds `next_step` proposes: past this, the spread is the machine's, not chance's.
MAX_ROUNDS_TO_SETTLE = 12
# Student's t, two-sided 95%, by degrees of freedom (rounds - 1); 2.0 beyond the table.
_T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
        10: 2.23, 12: 2.18, 15: 2.13, 20: 2.09, 30: 2.04}


def _t95(df: int) -> float:
    known = [d for d in _T95 if d <= df]
    return _T95[max(known)] if known else _T95[1]


def ratio_interval(ratios: Sequence[float]) -> tuple[float, float] | None:
    """95% interval of the typical ratio (geometric mean: ratios multiply, so their logs are
    averaged); None with fewer than two rounds."""
    if len(ratios) < 2 or any(r <= 0 for r in ratios):
        return None
    logs = [math.log(r) for r in ratios]
    half = _t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    mid = statistics.fmean(logs)
    return math.exp(mid - half), math.exp(mid + half)


@dataclass(frozen=True, kw_only=True)
class Settling:
    """The typed verdict on a verified ratio, read by the headline, `report` and the JSON."""
    settled: bool
    ratio: float | None                 # median ratio over the rounds that count (quiet ones)
    low: float                          # lowest and highest ratio over every round
    high: float
    rounds: int                         # rounds measured
    quiet_rounds: int                   # rounds no window of which was disturbed
    interval: tuple[float, float] | None  # 95% interval over the quiet rounds
    outside_share: float | None         # median share other processes took in the windows

    def describe(self) -> str:
        """'2.37x (95% interval 2.30-2.45x, 5 rounds)' or 'unsettled: 1.3-6.7x over 3 rounds;
        other processes took 38% of the trial cores'."""
        if self.settled and self.ratio is not None and self.interval is not None:
            return f"{self.ratio:.2f}x ({self.interval_text()})"
        text = f"unsettled: {self.low:.1f}-{self.high:.1f}x over {self.rounds} rounds"
        if self.outside_share is not None and disturbed(self.outside_share):
            text += f"; {describe_outside(self.outside_share)}"
        elif self.quiet_rounds < self.rounds:
            text += (f"; other processes took the trial cores in "
                     f"{self.rounds - self.quiet_rounds} of them")
        elif self.rounds < 2:
            text += "; one round cannot say"
        return text

    def interval_text(self) -> str:
        """'95% interval 2.30-2.45x, 5 rounds': the one interval a settled figure is shown with
        (the IQR's ± beside it read as a second, narrower claim)."""
        if self.interval is None:
            return f"{self.quiet_rounds} rounds"
        lo, hi = self.interval
        return f"95% interval {lo:.2f}-{hi:.2f}x, {self.quiet_rounds} rounds"

    def rounds_to_settle(self) -> int | None:
        """Quiet rounds that would narrow the interval to ±10% if the next rounds spread as the
        quiet ones so far did (the interval shrinks with t/sqrt(n)); None when unknown or more
        than MAX_ROUNDS_TO_SETTLE."""
        if self.interval is None or self.quiet_rounds < 2:
            return None
        n = self.quiet_rounds
        sd = math.log(self.interval[1] / self.interval[0]) / 2 * math.sqrt(n) / _t95(n - 1)
        return next((m for m in range(n + 1, MAX_ROUNDS_TO_SETTLE + 1)
                     if _t95(m - 1) * sd / math.sqrt(m) <= math.log(1 + SETTLED_HALF_WIDTH)),
                    None)

    def next_step(self, command: str = "autotune verify", rounds_flag: str = "--rounds") -> str:
        """Why the figure is unsettled, from what was measured, and the command that settles
        it; '' when settled. Other processes are blamed only when rounds measured them."""
        if self.settled:
            return ""
        if self.quiet_rounds < self.rounds:
            return f"run `{command}` when the machine is quiet for a figure"
        if self.interval is None:
            return f"one round has no spread: `{command} {rounds_flag} 3` measures more"
        need = self.rounds_to_settle()
        lo, hi = self.interval
        return (f"the machine was quiet, but {self.quiet_rounds} rounds give a 95% interval of "
                f"{lo:.2f}-{hi:.2f}x, wider than the ±{SETTLED_HALF_WIDTH:.0%} that settles a "
                f"figure: `{command} {rounds_flag} {need or MAX_ROUNDS_TO_SETTLE}` measures "
                + ("enough rounds at this spread" if need else "more rounds"))

    def to_json(self) -> dict[str, Any]:
        return {"settled": self.settled, "ratio": self.ratio, "low": self.low, "high": self.high,
                "rounds": self.rounds, "quiet_rounds": self.quiet_rounds,
                "interval": list(self.interval) if self.interval else None,
                "outside_share": self.outside_share, "text": self.describe(),
                "rounds_to_settle": self.rounds_to_settle()}


def settle(ratios: Sequence[float], outside: Sequence[float | None]) -> Settling | None:
    """The verdict on per-round ratios; `outside[i]` is the largest share other processes took
    in round i's windows (None: not measured, counted as quiet). None without any round."""
    if not ratios:
        return None
    quiet = [r for r, o in zip(ratios, outside) if not disturbed(o)]
    interval = ratio_interval(quiet)
    settled = interval is not None and (interval[1] / statistics.median(quiet) - 1 <= SETTLED_HALF_WIDTH
                                        and 1 - interval[0] / statistics.median(quiet)
                                        <= SETTLED_HALF_WIDTH)
    shares = [o for o in outside if o is not None]
    return Settling(settled=settled, ratio=statistics.median(quiet) if quiet else None,
                    low=min(ratios), high=max(ratios), rounds=len(ratios),
                    quiet_rounds=len(quiet), interval=interval,
                    outside_share=statistics.median(shares) if shares else None)
