"""What the verification rounds prove about a ratio (pure): settled, a lower bound, or unsettled.

A loaded machine measured 6.7, 3.1 and 1.26 in three verification rounds and the tool still said
"3.11x (±1.37)"; a quiet re-run gave 2.37x. So verification goes on, round after round, until the
ratio's confidence interval is narrow (SETTLED_HALF_WIDTH of the ratio) or its share of the budget
runs out. Rounds in which other processes took the trial cores (measure/contention.py) do not
count: a ratio measured under load says as much about the load as about the configuration.

A cloud VM's quiet rounds may never narrow to ±10% (issue 47: 12 rounds, 95% interval
1.71-2.13x), yet they prove the configuration at least 1.75x faster. So a ratio whose
interval stays wide is still a verified figure when its one-sided 95% lower bound reaches
MIN_GAIN: the headline then names the bound, "≥1.75x (95% lower bound, 12 rounds; median
1.90x)". The Verdict here is the one answer that the headline, the JSON, `report`, `export` and
`launch` read.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..measure.contention import describe_outside, disturbed
from ..result import StrEnum

# Settled: the 95% interval of the ratio lies within ±10% of it.
SETTLED_HALF_WIDTH = 0.10
# The least gain worth recommending: a candidate "holds up" with at least this in the median round
# (recommend/verify.py), and a lower bound is headlined only when it reaches it, so "verified
# speedup" never claims less than the gain the tool itself requires (a bound of 1.004x would read
# "≥1.00x").
MIN_GAIN = 1.02
# The most rounds `next_step` proposes: past this, the spread is the machine's, not chance's.
MAX_ROUNDS_TO_SETTLE = 12
# Student's t by degrees of freedom (rounds - 1), the nearest tabled one at or below (on the safe
# side): two-sided 95% for the interval, one-sided 95% for the lower bound.
_T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
        10: 2.23, 12: 2.18, 15: 2.13, 20: 2.09, 30: 2.04}
_T95_ONE_SIDED = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895,
                  8: 1.860, 9: 1.833, 10: 1.812, 11: 1.796, 12: 1.782, 15: 1.753, 20: 1.725,
                  30: 1.697}


class Verdict(StrEnum):
    """What the quiet rounds prove, strongest first; the values are the stored strings."""
    SETTLED = "settled"           # the 95% interval lies within ±10% of the median: the figure
    LOWER_BOUND = "lower_bound"   # wider, but the one-sided 95% lower bound reaches MIN_GAIN
    UNSETTLED = "unsettled"       # neither: no figure to keep

    @property
    def verified(self) -> bool:
        """A figure to headline, launch and export by."""
        return self is not Verdict.UNSETTLED

    @classmethod
    def stored(cls, rec: Mapping[str, Any]) -> Verdict:
        """The verdict of a stored recommendation or settling. One stored before the key existed
        knew only settled or not (a recommendation without any verdict counted as settled)."""
        value = rec.get("verdict")
        if value in {v.value for v in cls}:
            return cls(value)
        return cls.UNSETTLED if rec.get("settled") is False else cls.SETTLED


def _t(table: dict[int, float], df: int) -> float:
    known = [d for d in table if d <= df]
    return table[max(known)] if known else table[1]


def _t95(df: int) -> float:
    return _t(_T95, df)


def _log_mean_and_error(ratios: Sequence[float]) -> tuple[float, float] | None:
    """The mean of the ratios' logs and its standard error (ratios multiply, so their logs are
    averaged: the geometric mean); None with fewer than two rounds."""
    if len(ratios) < 2 or any(r <= 0 for r in ratios):
        return None
    logs = [math.log(r) for r in ratios]
    return statistics.fmean(logs), statistics.stdev(logs) / math.sqrt(len(logs))


def ratio_interval(ratios: Sequence[float]) -> tuple[float, float] | None:
    """Two-sided 95% interval of the typical ratio (geometric mean); None with fewer than two
    rounds."""
    fit = _log_mean_and_error(ratios)
    if fit is None:
        return None
    mid, error = fit
    half = _t95(len(ratios) - 1) * error
    return math.exp(mid - half), math.exp(mid + half)


def ratio_lower_bound(ratios: Sequence[float]) -> float | None:
    """One-sided 95% lower bound of the typical ratio (geometric mean, Student's t one-sided on
    the logs): the typical ratio is at least this with 95% confidence. Not the lower end of the
    two-sided interval, which holds with 97.5% and so understates what the rounds prove. None
    with fewer than two rounds."""
    fit = _log_mean_and_error(ratios)
    if fit is None:
        return None
    mid, error = fit
    return math.exp(mid - _t(_T95_ONE_SIDED, len(ratios) - 1) * error)


@dataclass(frozen=True, kw_only=True)
class Settling:
    """The typed verdict on a verified ratio, read by the headline, `report` and the JSON."""
    verdict: Verdict
    ratio: float | None                 # median ratio over the rounds that count (quiet ones)
    low: float                          # lowest and highest ratio of any round: per-round detail
    high: float                         # for the JSON, never a headline's range
    rounds: int                         # rounds measured
    quiet_rounds: int                   # rounds no window of which was disturbed
    interval: tuple[float, float] | None  # two-sided 95% interval over the quiet rounds
    lower_bound: float | None = None    # one-sided 95% lower bound over the quiet rounds
    outside_share: float | None = None  # median share other processes took in the windows

    @property
    def settled(self) -> bool:
        return self.verdict is Verdict.SETTLED

    def figure(self) -> tuple[str, str]:
        """The verified figure and what it is, one interval or one bound: ('2.37x', '95%
        interval 2.30-2.45x, 5 rounds') or ('≥1.75x', '95% lower bound, 12 rounds; median
        1.90x'); ('', '') when unsettled."""
        if self.verdict is Verdict.SETTLED and self.ratio is not None:
            return f"{self.ratio:.2f}x", self.interval_text()
        if self.verdict is Verdict.LOWER_BOUND and self.lower_bound is not None:
            return (f"≥{self.lower_bound:.2f}x", f"95% lower bound, {self.quiet_rounds} rounds; "
                                                  f"median {self.ratio:.2f}x")
        return "", ""

    def describe(self) -> str:
        """'2.37x (95% interval 2.30-2.45x, 5 rounds)', '≥1.75x (95% lower bound, 12 rounds;
        median 1.90x)', or 'unsettled over 3 rounds; other processes took 38% of the trial
        cores': one range at most, the 95% one, named."""
        figure, what = self.figure()
        if figure:
            return f"{figure} ({what})"
        text = (f"unsettled: median {self.ratio:.2f}x ({self.interval_text()})"
                if self.interval is not None and self.ratio is not None
                else f"unsettled over {self.rounds} round{'s' if self.rounds != 1 else ''}")
        if self.outside_share is not None and disturbed(self.outside_share):
            text += f"; {describe_outside(self.outside_share)}"
        elif self.quiet_rounds < self.rounds:
            text += (f"; other processes took the trial cores in "
                     f"{self.rounds - self.quiet_rounds} of {self.rounds} rounds")
        elif self.rounds < 2:
            text += "; one round cannot say"
        return text

    def interval_text(self) -> str:
        """'95% interval 2.30-2.45x, 5 rounds': the one interval a figure is shown with (the
        IQR's ± beside it read as a second, narrower claim)."""
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
        """Why no figure is verified, from what was measured, and the command that settles it;
        '' for a verified figure. Other processes are blamed only when rounds measured them."""
        if self.verdict.verified:
            return ""
        if self.quiet_rounds < self.rounds:
            return f"run `{command}` when the machine is quiet for a figure"
        if self.interval is None:
            return f"one round has no spread: `{command} {rounds_flag} 3` measures more"
        need = self.rounds_to_settle()
        return (f"the machine was quiet, but {self.quiet_rounds} rounds spread too widely to "
                f"settle a figure (±{SETTLED_HALF_WIDTH:.0%}) or to bound it at {MIN_GAIN:.2f}x "
                f"or more: `{command} {rounds_flag} {need or MAX_ROUNDS_TO_SETTLE}` measures "
                + ("enough rounds at this spread" if need else "more rounds"))

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict.value, "settled": self.settled, "ratio": self.ratio,
                "low": self.low, "high": self.high, "rounds": self.rounds,
                "quiet_rounds": self.quiet_rounds,
                "interval": list(self.interval) if self.interval else None,
                "lower_bound": self.lower_bound, "outside_share": self.outside_share,
                "text": self.describe(), "rounds_to_settle": self.rounds_to_settle()}


def shown_in(headline: str, text: str) -> bool:
    """Whether a settling's text (Settling.describe, or the stored "text") is already in a
    headline, its parenthesised figure included: a summary then shows it once, not twice."""
    return text.split("(", 1)[-1].rstrip(")") in headline


def _verdict(median: float | None, interval: tuple[float, float] | None,
             bound: float | None) -> Verdict:
    if median is None or interval is None:
        return Verdict.UNSETTLED
    lo, hi = interval
    if hi / median - 1 <= SETTLED_HALF_WIDTH and 1 - lo / median <= SETTLED_HALF_WIDTH:
        return Verdict.SETTLED
    return Verdict.LOWER_BOUND if bound is not None and bound >= MIN_GAIN else Verdict.UNSETTLED


def settle(ratios: Sequence[float], outside: Sequence[float | None]) -> Settling | None:
    """The verdict on per-round ratios; `outside[i]` is the largest share other processes took
    in round i's windows (None: not measured, counted as quiet). None without any round."""
    if not ratios:
        return None
    quiet = [r for r, o in zip(ratios, outside) if not disturbed(o)]
    median = statistics.median(quiet) if quiet else None
    interval, bound = ratio_interval(quiet), ratio_lower_bound(quiet)
    shares = [o for o in outside if o is not None]
    return Settling(verdict=_verdict(median, interval, bound), ratio=median,
                    low=min(ratios), high=max(ratios), rounds=len(ratios),
                    quiet_rounds=len(quiet), interval=interval, lower_bound=bound,
                    outside_share=statistics.median(shares) if shares else None)
