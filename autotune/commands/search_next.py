"""What a search left undone for lack of budget, priced, for the account's last line: "a
10-minute budget would also confirm precision=bf16 (~70 s) and measure about 30 more
configurations" (search/account.next_step words it)."""
from __future__ import annotations

import math

from ..config import describe_changes
from ..quality.confirm import SETTLE_COMMAND
from ..quality.verdict import QualityStatus
from ..recommend.recommendation import Recommendation
from ..result import Outcome
from ..search.account import Account, next_step
from ..search.options import SearchResult
from ..training import QUALITY_SAMPLES


def what_next(result: SearchResult, rec: Recommendation | None, account: Account,
              budget_s: float) -> str:
    """The next budget step's sentence ('' when it would buy nothing this search lacked):
    confirmations that did not fit, the quality of the fastest classes left pending, the rounds
    that would settle the figure, then more configurations at the trials' typical cost."""
    wants: list[tuple[str, float]] = []
    for what, seconds in (rec.extra.get("unconfirmed") or []) if rec is not None else []:
        wants.append((f"confirm the accuracy of {what}", float(seconds)))
    book = result.book
    if book is not None:
        pending = sorted((r for r in result.records if r.outcome == Outcome.OK and r.throughput
                          and r.result.quality == QualityStatus.PENDING
                          and not r.result.stopped_early),
                         key=lambda r: r.throughput, reverse=True)
        seen: set[str] = set()
        for r in pending[:3]:
            cls = book.class_of(r.config)
            if cls not in seen:
                seen.add(cls)
                cost = book.cost(r.config, r.throughput, book.length or QUALITY_SAMPLES)
                wants.append((f"measure the quality of {describe_changes(r.config)}", cost))
    runs = account.runs.get("trials", 0)
    trial_s = account.seconds["trials"] / runs if runs else None
    if rec is not None and rec.settling is not None and not rec.settled:
        rounds = rec.settling.rounds_to_settle()
        if rounds and trial_s:
            more = max(0, rounds - rec.settling.rounds)
            if more:
                wants.insert(0, (f"settle the verified figure ({more} more rounds)",
                                 2 * more * trial_s))
    return next_step(budget_s=budget_s, trial_s=trial_s, wants=wants,
                     exhausted=result.stop_reason == "exhausted")


def settle_words(rec: Recommendation | None) -> list[str]:
    """What settling each faster launch whose accuracy was not shown would cost, and the command
    that does it; or that no number of seeds would (its measured drop is at or past the
    tolerance)."""
    out = []
    for what, seconds in (rec.extra.get("unconfirmed") or []) if rec is not None else []:
        if math.isinf(float(seconds)):
            out.append(f"no number of paired seeds would show the accuracy of {what} within the "
                       "tolerance: its measured drop is at or past it")
        else:
            minutes = max(1, math.ceil(float(seconds) * 1.2 / 60))
            out.append(f"settling the accuracy of {what} takes about {float(seconds):.0f} s of "
                       f"paired quality runs: {SETTLE_COMMAND} --budget {minutes}m")
    return out


# The search's own stops, and why they leave time: a longer budget would not have bought more.
_STOPPED_BY_ITSELF = {
    "stagnated": "the search stopped by itself: its last trials gained less than 1% (its "
                 "patience), so more of the budget would have bought nothing it was finding",
    "exhausted": "every configuration of the space was measured",
    "max_trials": "--max-trials was reached"}


def unused_words(result: SearchResult, rec: Recommendation | None, unused_s: float,
                 round_limit: int) -> str:
    """Why `unused_s` of the budget was left ('' for less than a second)."""
    if unused_s < 1:
        return ""
    if result.stop_reason in _STOPPED_BY_ITSELF:
        return _STOPPED_BY_ITSELF[result.stop_reason]
    if rec is None or not rec.rounds:
        return "nothing was left to verify in the time"
    if rec.rounds >= round_limit:
        return f"verification ran its most rounds ({round_limit}; --max-verify-rounds)"
    return ("less than another verification round fit in what was left: the reserve's margin "
            "for the spread of this search's runs, and the last round's remainder")
