"""Time budgets: parse `90s`, `30m`, `1h30m`, and plan how a budget is spent (pure)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import NamedTuple, Sequence

from ..config.limits import MAX_BUDGET_S
from ..errors import BudgetError
from ..quality.looks import LEAST_LOOK_PAIRS
from .reserve import RunCosts, plan_reserve

_PART = re.compile(r"(\d+(?:\.\d+)?)([hms])")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0}


def parse_budget(text: str) -> float:
    """'90s' -> 90.0, '30m' -> 1800.0, '1h30m' -> 5400.0; a bare number means seconds."""
    seconds = parse_duration(text, "--budget")
    if seconds > MAX_BUDGET_S:
        raise BudgetError(f"--budget {text!r}: more than a week; did you mean minutes (m)?")
    return seconds


def parse_duration(text: str, flag: str) -> float:
    """A positive duration as --budget takes it ('90s', '30m', '1h30m', a bare number of
    seconds); `flag` names the option in the one-line error."""
    raw = str(text).strip().lower().replace(" ", "")
    if not raw:
        raise BudgetError(f"{flag}: empty; use e.g. 90s, 30m or 1h30m")
    if raw.startswith("-"):
        raise BudgetError(f"{flag} {text!r}: {flag.lstrip('-').replace('-', ' ')} must be "
                          "positive; use e.g. 90s, 30m or 1h30m")
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        seconds = float(raw)
    else:
        pos, seconds, seen = 0, 0.0, set()
        for m in _PART.finditer(raw):
            if m.start() != pos or m.group(2) in seen:
                break
            seen.add(m.group(2))
            seconds += float(m.group(1)) * _UNIT[m.group(2)]
            pos = m.end()
        if pos != len(raw) or not seen or not _order(raw):
            raise BudgetError(f"{flag} {text!r}: not a duration; use e.g. 90s, 30m or 1h30m")
    if seconds <= 0:
        raise BudgetError(f"{flag} {text!r}: must be more than zero")
    return seconds


def _order(raw: str) -> bool:
    """Units must come largest first, as people write them (1h30m, not 30m1h)."""
    units = [m.group(2) for m in _PART.finditer(raw)]
    return units == sorted(units, key="hms".index)


def format_seconds(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


@dataclass(frozen=True, kw_only=True)
class BudgetPlan:
    """How a search spends its budget: timed window per trial and what verification keeps."""
    total_s: float
    target_seconds: float     # timed window of each search trial
    verify_reserve_s: float   # kept back for interleaved verification at the end
    min_trial_s: float        # do not start a trial with less than this left


SHORT_WINDOW_S = 2.0            # the timed window of a search under SHORT_WINDOW_UNDER_S
SHORT_WINDOW_UNDER_S = 1200.0
LONG_WINDOW_S = 5.0             # and of a longer one, which is not short of trials


def plan_budget(total_s: float, *, startup_s: float = 4.0) -> BudgetPlan:
    """Shorter budgets get shorter timed windows so that enough configurations get tried.

    A trial costs start-up (about 3 s here from launch to the first step) plus warmup plus the
    window; below ~2 s of window, start-up dominates and step-time noise grows. A search under
    SHORT_WINDOW_UNDER_S times SHORT_WINDOW_S windows: on the quiet 2-core EPYC a verification
    round's ratio spread as widely over 3 s and 5 s windows as over 2 s ones (the machine's
    drift, not the window, sets it), and agreed with them within 1-2% (two runs of
    benchmarks/timed/window_length.py, 2026-11-30), while a round of 2 s windows took 4.4 s
    against 6.5 s. A 5-minute search had timed 3 s windows and measured 11 configurations.
    """
    window = SHORT_WINDOW_S if total_s < SHORT_WINDOW_UNDER_S else LONG_WINDOW_S
    trial_s = startup_s + 1.0 + window
    if (why := too_short_to_verify(total_s, trial_s, measured=False)) is not None:
        raise BudgetError(why)
    reserve = min(0.25 * total_s, 4 * 3 * trial_s)  # up to 3 rounds x (3 candidates + default)
    return BudgetPlan(total_s=total_s, target_seconds=window, verify_reserve_s=reserve,
                      min_trial_s=trial_s * 1.5)


# The least budget a search is started with, whatever the model of its costs says: a trial of the
# default launch and one verification round of it beside a candidate fit in it on a quiet 2-core
# machine with room to spare (the tests' and CI's shortest real searches run 60 s).
LEAST_BUDGET_S = 60.0
# What the least budget allows beyond its runs: a start slower than the one measured or modelled.
LEAST_BUDGET_SLACK = 1.5


def least_budget(trial_s: float) -> float:
    """The least budget that can verify anything: one trial of the default launch and one
    verification round of it beside a candidate (three runs of `trial_s`, each with half again
    for a slower start), and the store; LEAST_BUDGET_S at least."""
    return max(LEAST_BUDGET_S, math.ceil(3 * trial_s * LEAST_BUDGET_SLACK + 2.0))


def too_short_to_verify(total_s: float, trial_s: float, *, measured: bool) -> str | None:
    """"--budget 30s is too short to verify anything on this machine: ..." or None."""
    least = least_budget(trial_s)
    if total_s >= least:
        return None
    how = "as this study measured it" if measured else "estimated: nothing has run yet"
    return (f"--budget {total_s:.0f}s is too short to verify anything on this machine: one "
            f"trial of the default launch (~{trial_s:.0f} s, {how}) and one verification round "
            f"of it beside a candidate need at least {least:.0f}s; use --budget {least:.0f}s or "
            "more")


@dataclass(frozen=True, kw_only=True)
class PhaseCosts:
    """What the rest of a search costs at least, estimated from its first trial (seconds)."""
    spent_s: float            # the budget already used (start-up and the first trial)
    noise_floor_s: float      # the default launch's seeded quality runs
    trials_s: float           # the other reference and a few sampled configurations
    verification_s: float     # the asked rounds of the default and one candidate
    confirmation_s: float = 0.0  # seeded confirmation of a winner that changes the math

    @property
    def minimum_s(self) -> float:
        return (self.spent_s + self.noise_floor_s + self.trials_s + self.verification_s
                + self.confirmation_s)

    def phases(self) -> dict[str, float]:
        return {"the noise floor": self.noise_floor_s, "the trials": self.trials_s,
                "verification": self.verification_s, "the quality confirmation":
                self.confirmation_s}


# Sampled configurations a search needs at least to be worth verifying.
MIN_SEARCH_TRIALS = 3


def phase_costs(*, spent_s: float, trial_s: float, quality_run_s: float, quality_runs: int,
                verify_rounds: int) -> PhaseCosts:
    """The least the search still needs: its noise floor, the run_cpu reference and
    MIN_SEARCH_TRIALS sampled trials, and `verify_rounds` rounds of two configurations."""
    return PhaseCosts(spent_s=spent_s, noise_floor_s=quality_run_s * quality_runs,
                      trials_s=trial_s * (1 + MIN_SEARCH_TRIALS),
                      verification_s=2 * trial_s * verify_rounds)


def too_short(costs: PhaseCosts, budget_s: float) -> str | None:
    """"4m is too short here: the noise floor alone takes about 2m; use at least 7m", or None
    when the budget covers the minimum."""
    if costs.minimum_s <= budget_s:
        return None
    name, biggest = max(costs.phases().items(), key=lambda kv: kv[1])
    at_least = -(-costs.minimum_s * 1.2 // 60)     # whole minutes, rounded up, with 20% slack
    return (f"{_minutes(budget_s)} is too short here: {name} alone takes about "
            f"{_minutes(biggest)}; use at least {at_least:.0f}m")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f}m" if seconds >= 90 else f"{seconds:.0f}s"


# Rounds of the default and the confirmed winner that verification needs past the asked ones
# before a ratio settles on a quiet 2-core machine: the first command's winner spread so that 8
# rounds gave 1.22-1.43x around 1.32x, the ±10% that settles (benchmarks/results/
# first_command_verify_2026-11-26.txt), and 3 asked rounds did not.
SETTLE_ROUNDS = 5


class Reserve(NamedTuple):
    """What the search keeps back for after it, how much of that is for confirmations, and the
    margin inside it (the predicted costs' spread)."""
    total_s: float
    confirm_s: float
    margin_s: float = 0.0
    verify_s: float = 0.0    # the lineup's verification rounds
    settle_s: float = 0.0    # the rounds that settle the winner's ratio

    def said(self) -> str:
        """What the reserve is kept for, in words (after sampling stopped for it)."""
        parts = [(self.verify_s, "verification"), (self.settle_s, "settling the ratio"),
                 (self.confirm_s, "a confirmation of accuracy"), (self.margin_s, "margin")]
        kept = [f"{format_seconds(s)} {what}" for s, what in parts if s >= 0.5]
        return ", ".join(kept) if kept else f"{format_seconds(self.total_s)}"


def verify_reserve(*, costs: RunCosts | None, running: Sequence[bool], confirm_s: float,
                   rounds: int, floor_s: float, budget_s: float, sampled: bool = False,
                   planned_s: float = 0.0) -> Reserve:
    """Seconds the search keeps for after it (search/reserve.py): `rounds` rounds of the lineup (the
    default launch and the candidates; `running`: whether each one's launch is running now, so
    that its first round is a window, not a start), at most 40% of the budget but no less than
    those rounds of the default and the leader once a configuration was `sampled`; SETTLE_ROUNDS
    more rounds of two, in whole rounds, the number nearest to 15% of it; room for seeded
    confirmations (confirmation_reserve: `confirm_s` a least look, `planned_s` the leader's
    planned one), none when even a least look does not fit in 40% of it: time kept for a
    confirmation that cannot run is lost to the trials (an 8-minute search over two hosts kept 2
    minutes for a 246 s one, never ran it, and ended with 2m41s unused), and a search whose
    leader changes the math but is never confirmed can only recommend the default's math (the
    same search, with nothing kept, sampled 18 trials, led at 3.9x across two hosts, and
    recommended run_cpu's 1.24x: the 171 s confirmation did not fit); and a margin of the
    predicted runs' spread. Each run is priced at what this search measured for its kind
    (`costs`: a start or a window of a running launch). Before any trial: `floor_s`, none of it
    for a confirmation."""
    if costs is None:
        return Reserve(floor_s, 0.0)
    plan = plan_reserve(costs, running=running, rounds=rounds, settle_rounds=SETTLE_ROUNDS,
                        confirm_s=confirmation_reserve(confirm_s, budget_s, planned_s),
                        budget_s=budget_s, sampled=sampled)
    return Reserve(plan.total_s, plan.confirm_s, plan.margin_s,
                   verify_s=plan.verification.mean_s, settle_s=plan.settling.mean_s)


def confirmation_reserve(confirm_s: float, budget_s: float, planned_s: float = 0.0) -> float:
    """Of verify_reserve, the seconds kept for seeded confirmations: `confirm_s` is the least
    look (LEAST_LOOK_PAIRS pairs), `planned_s` the look the leader's screening plans
    (quality/confirm.look_pairs). The larger of two least looks, where they fit in 25% of the
    budget (a class that fails its confirmation hands over to the next), and the planned look
    where it fits in 40%, else the whole pairs of it that do, if they make a least look; none
    when neither fits. Kept for a least look alone, a 5-minute search's bf16 look planned 6
    pairs but got the 4 kept: its upper bound 2.20 pp, not shown (2026-11-30)."""
    two = 2 * confirm_s if 2 * confirm_s <= 0.25 * budget_s else 0.0
    one = max(confirm_s, planned_s)
    if one > 0.4 * budget_s:      # the whole pairs of it that fit
        pair_s = confirm_s / LEAST_LOOK_PAIRS
        one = math.floor(0.4 * budget_s / pair_s) * pair_s if pair_s > 0 else 0.0
    return max(two, one if one >= confirm_s else 0.0)


# Until a trial across hosts is measured, it is taken as this much dearer than one host's: each
# host starts its ranks and they meet before the first step. On the namespace hosts a whole 2-host
# trial cost 0.91-1.37x a 1-host one, median 1.20 (benchmarks/results/hosts_startup_2026-11-26.json).
SPAN_COST_FACTOR = 1.25


def trial_costs(seconds_by_hosts: dict[int, list[float]],
                hosts: int) -> dict[int, tuple[float, bool]]:
    """Seconds one trial costs on 1..hosts hosts, and whether that was measured: the median of
    the trials measured with that many hosts, else an estimate from the nearest measured count
    (SPAN_COST_FACTOR dearer once it spans hosts). Empty when nothing was measured."""
    medians = {k: sorted(v)[len(v) // 2] for k, v in seconds_by_hosts.items() if v}
    if not medians:
        return {}
    out: dict[int, tuple[float, bool]] = {}
    for k in range(1, max(1, hosts) + 1):
        if k in medians:
            out[k] = (medians[k], True)
            continue
        near = min(medians, key=lambda m: (abs(m - k), m))
        base = medians[near]
        if near == 1 and k > 1:
            base *= SPAN_COST_FACTOR
        elif near > 1 and k == 1:
            base /= SPAN_COST_FACTOR
        out[k] = (base, False)
    return out


def budget_note(trials_s: float, costs: dict[int, tuple[float, bool]], *,
                floor_s: float = 0.0, verify_s: float = 0.0, confirm_s: float = 0.0) -> str:
    """"budget: 5m10s for trials after the noise floor (~2m) and verification (~1m): about 14
    trials on 1 host (22 s each) or 11 across 2 hosts (~28 s each, estimated until one runs)".
    `confirm_s`: the part of `verify_s` kept for the leader's seeded accuracy confirmation, named,
    since it is what makes verification grow once a leader changes the math (an 8-minute search
    over two hosts said "about 22 across 2 hosts", then "no time left ... verification (~6m)")."""
    verification = f"verification (~{_minutes(verify_s)}"
    if confirm_s >= 1:
        verification += (f", ~{_minutes(confirm_s)} of it to confirm the leader's accuracy on new "
                         "seeds: it changes the math")
    after = [text for text, s in ((f"the noise floor (~{_minutes(floor_s)})", floor_s),
                                  (verification + ")", verify_s)) if s >= 1]
    head = f"budget: {format_seconds(max(0.0, trials_s))} for trials" + \
        (f" after {' and '.join(after)}" if after else "")
    cheapest = min((cost for cost, _ in costs.values()), default=0.0)
    if costs and trials_s < cheapest:
        return (f"budget: no time left for trials after {' and '.join(after) or 'the references'}"
                f" (one takes {cheapest:.0f} s)")
    parts = []
    for k, (cost, measured) in sorted(costs.items()):
        where = "on 1 host" if k == 1 else f"across {k} hosts"
        each = f"{cost:.0f} s each" if measured else \
            f"~{cost:.0f} s each, estimated until one runs"
        parts.append(f"{max(0, int(trials_s // max(cost, 1.0)))} {where} ({each})")
    if len(costs) == 1:   # one machine: no hosts to name
        (cost, _), = costs.values()
        return f"{head}: about {max(0, int(trials_s // max(cost, 1.0)))} trials of ~{cost:.0f} s"
    return f"{head}: about " + " or ".join(parts)
