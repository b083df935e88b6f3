"""What the rest of a search will cost, predicted from its own account so far (pure).

A run either starts its launch (processes, imports, process group, model, warm-up, then the
window) or is one more window of a launch already running (run/warm.py): on the quiet 2-core EPYC
a start cost about 8 s and a window 3.3 s. The reserve a search keeps for after it (verification
rounds, the seeded confirmation of a leader that changes the math, the rounds that settle the
winner's ratio) was once sized as a start per lineup member: most runs are windows now, so a
5-minute search stopped sampling at 3:29 with 1:31 of its budget never used (issue 62). Here
each coming run is priced as what it will be (a window for a launch that is running, a start
for one that is not) at the median this search measured for that kind, with its spread; the
search samples until this prediction plus a margin from that spread reaches the time left, and
predicts again after every trial.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..plan.launch_plan import CEILING_SECONDS

# With fewer runs of a kind than this, its spread is taken as FALLBACK_SPREAD of its median.
MIN_FOR_SPREAD = 4
# A run's standard deviation, as a share of its median, before its spread is measured: trials on
# the 2-core EPYC spread by up to 18% when re-run quietly (benchmarks/results/
# verification_spread.json); a quarter is on the safe side of that.
FALLBACK_SPREAD = 0.25
# The margin is this many standard deviations of the predicted sum: one-sided 95%.
MARGIN_Z = 1.65
# Storing the recommendation and its launch command after verification (commands/search.py).
STORE_S = 2.0


@dataclass(frozen=True, kw_only=True)
class RunCosts:
    """What one more run costs, from the runs this search measured (seconds)."""
    start_s: float        # a run that starts its launch (median)
    start_sd: float       # its spread, as a standard deviation
    window_s: float       # a window of a launch already running (median; a start's when none)
    window_sd: float
    windows: bool         # windows were measured: launches are kept between runs

    def of(self, running: bool) -> tuple[float, float]:
        """(seconds, variance) of one run whose launch is running or not."""
        if running and self.windows:
            return self.window_s, self.window_sd ** 2
        return self.start_s, self.start_sd ** 2


def _median_sd(values: Sequence[float]) -> tuple[float, float]:
    """The median and a standard deviation from the interquartile range (IQR / 1.35, robust to
    the one trial a stray process slowed), FALLBACK_SPREAD of the median with few values."""
    s = sorted(values)
    med = s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2
    if len(s) < MIN_FOR_SPREAD:
        return med, FALLBACK_SPREAD * med
    q1, q3 = s[len(s) // 4], s[(3 * len(s)) // 4]
    return med, max((q3 - q1) / 1.35, 0.05 * med)


# The stages of a start that a window of a running launch does not repeat (measure/split.py's
# fixed costs: process start, imports, process group); model and warm-up it repeats.
START_ONLY = ("start", "imports", "group")


def window_of_start(seconds: float, fixed: dict[str, float] | None) -> float | None:
    """What a window of this start's launch will cost: the start less the stages only a start
    pays (None: its stages were not measured, as for a script's run)."""
    if not fixed or any(k not in fixed for k in START_ONLY):
        return None
    return max(0.0, seconds - sum(fixed[k] for k in START_ONLY))


# The runs the reserve prices (verification's, a settling round's) time no ceiling: a trial does,
# when it is its class's fastest so far (worker/train.py), for about CEILING_SECONDS after two
# untimed steps. Priced with it, a verification window of the 5-minute search cost 5.5 s instead
# of the 3.3 s it took, and sampling stopped at 1:44 with 40 s of the budget never used (issue 62).
CEILING_WARM_STEPS = 2


def without_ceiling(seconds: float, *, ceiling_timed: bool, step_s: float | None) -> float:
    """A trial's seconds less its ceiling's window and warm steps (a run that times none)."""
    if not ceiling_timed:
        return seconds
    return max(0.0, seconds - CEILING_SECONDS - CEILING_WARM_STEPS * (step_s or 0.0))


def run_costs(starts: Sequence[float], windows: Sequence[float],
              estimated: Sequence[float] = ()) -> RunCosts | None:
    """The costs of a start and of a window from those measured; None before any. Before any
    window ran, the windows `estimated` from the starts' own stages (window_of_start) stand for
    them (a 90-second search priced its first verification rounds as starts and left 35 s).
    With windows only (every run so far came back to a running launch), a start is taken as the
    dearest window: no cheaper than what was seen."""
    if not starts and not windows:
        return None
    windows = windows or estimated
    w_med, w_sd = _median_sd(windows) if windows else (0.0, 0.0)
    s_med, s_sd = _median_sd(starts) if starts else (max(windows), FALLBACK_SPREAD * max(windows))
    if not windows:
        w_med, w_sd = s_med, s_sd
    return RunCosts(start_s=s_med, start_sd=s_sd, window_s=w_med, window_sd=w_sd,
                    windows=bool(windows))


@dataclass(frozen=True)
class Predicted:
    """A predicted sum of run costs: its mean and its variance (runs taken as independent)."""
    mean_s: float = 0.0
    var: float = 0.0

    def __add__(self, other: "Predicted") -> "Predicted":
        return Predicted(self.mean_s + other.mean_s, self.var + other.var)

    def capped(self, most_s: float) -> "Predicted":
        """At most `most_s` (a share of the budget): the variance shrinks alike."""
        if self.mean_s <= most_s:
            return self
        share = most_s / self.mean_s if self.mean_s else 0.0
        return Predicted(most_s, self.var * share * share)

    @property
    def margin_s(self) -> float:
        return MARGIN_Z * math.sqrt(self.var) + STORE_S


def rounds_cost(costs: RunCosts, running: Sequence[bool], rounds: int) -> Predicted:
    """`rounds` interleaved rounds of a lineup: each member's first run a window when its launch
    is running (`running`), else a start; every later run a window of the launch that first run
    left running (a start each time where launches are not kept: a script's)."""
    if rounds <= 0 or not running:
        return Predicted()
    mean = var = 0.0
    for up in running:
        s, v = costs.of(up)
        later_s, later_v = costs.of(True)
        mean += s + (rounds - 1) * later_s
        var += v + (rounds - 1) * later_v
    return Predicted(mean, var)


def rounds_that_fit(costs: RunCosts, running: Sequence[bool], time_s: float) -> int:
    """How many whole rounds of the lineup `running` the time holds, with the margin of their
    spread (0: not even one)."""
    n = 0
    while n < 1000:
        cost = rounds_cost(costs, running, n + 1)
        if cost.mean_s + cost.margin_s > time_s:
            return n
        n += 1
    return n


@dataclass(frozen=True, kw_only=True)
class ReservePlan:
    """What a search keeps back, by purpose, and the margin on their sum (seconds)."""
    verification: Predicted
    settling: Predicted
    confirm_s: float

    @property
    def total_s(self) -> float:
        return self.verification.mean_s + self.settling.mean_s + self.confirm_s + self.margin_s

    @property
    def margin_s(self) -> float:
        return (self.verification + self.settling).margin_s


def settling_cost(costs: RunCosts, settle_rounds: int) -> Predicted:
    """The rounds that settle the winner's ratio after verification's asked rounds: two launches
    kept running (the default and the winner), `settle_rounds` windows each. The one price of
    them: what the search keeps (plan_reserve) and what a confirmation must leave (recommend/
    choose.py); priced there as a start per run, it asked 75 s where the search had kept 34 s,
    and a 10-minute search's bf16 confirmation (79 s, 117 s left) did not run: the winner fell to
    run_cpu's settings at 1.42x against 2.42x, and 58 s went unused."""
    return rounds_cost(costs, [True, True], settle_rounds)


# The share of the budget kept for the rounds that settle the winner's ratio.
SETTLE_SHARE = 0.15


def settling_rounds(costs: RunCosts, budget_s: float, most: int) -> int:
    """How many rounds the search keeps to settle the winner's ratio: the whole number nearest
    to SETTLE_SHARE of the budget, at most `most`. The one count of them: what the search keeps
    (plan_reserve) and what a confirmation leaves after it (recommend/choose.py), so that a
    short search's confirmation does not leave 5 rounds where the search kept 3."""
    one = settling_cost(costs, 1).mean_s
    return min(most, math.floor(SETTLE_SHARE * budget_s / one + 0.5)) if one > 0 else most


def plan_reserve(costs: RunCosts, *, running: Sequence[bool], rounds: int, settle_rounds: int,
                 confirm_s: float, budget_s: float, sampled: bool = False) -> ReservePlan:
    """The verification of a lineup (`running`: whether each member's launch is running now,
    the default launch first) over `rounds` rounds, at most 40% of the budget, but, once the
    search has `sampled` a configuration beyond the references, no less than those rounds of
    the default and the leader alone (what recommend/fit.py always keeps); at most
    `settle_rounds` more rounds of two running launches (the default and the winner), in whole
    rounds, the number nearest to 15% of the budget (settling_rounds); and `confirm_s` for
    seeded confirmations (search/budget.confirmation_reserve).

    Whole rounds, because a part of one buys nothing: a 4-minute search of a script whose
    launch took 20 s kept 96 s (40%) for 3 rounds of two starts that took 121 s, and 36 s (15%)
    to settle the ratio where a round cost 40 s; it verified the leader over 3 rounds after 2
    sampled trials, left 27 s unused, and the ratio stayed unsettled (benchmarks/results/
    slow_start_4m_final_zen5_2026-11-29.txt). A fourth round narrows a 95% interval by a third
    (Student's t 4.30/sqrt(3) against 3.18/sqrt(4)); where trials are that slow, it is worth
    more than a second sampled trial (issue 62: rounds before breadth). Before the first one
    the floor is not kept: the margin of a search's first few runs is wide (FALLBACK_SPREAD),
    and with it the same search stopped at its references and sampled nothing."""
    verify = rounds_cost(costs, running, rounds).capped(0.4 * budget_s)
    least = rounds_cost(costs, (list(running) + [False, False])[:2], rounds)
    if sampled and verify.mean_s < least.mean_s:
        verify = least
    settle = settling_cost(costs, settling_rounds(costs, budget_s, settle_rounds))
    return ReservePlan(verification=verify, settling=settle, confirm_s=confirm_s)

