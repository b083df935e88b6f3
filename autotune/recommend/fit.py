"""Verification's shape, from what its runs will cost (pure): how many candidates the time left
can settle, and whether what a settled figure leaves goes to more rounds.

Rounds before breadth (issue 62): nanoGPT's launch takes about 15 s and no window of it can be
kept, and a 4-minute search spent 2:14 on one round of several candidates and ended "by how much
is unsettled over 1 round". A ratio needs rounds; so the lineup is cut, from the last candidate,
to what the time left holds for the asked rounds (at each run's measured cost: a window where its
launch is running, a start where it is not, search/reserve.py), and the leader is always kept,
with the rounds that fit.
"""
from __future__ import annotations

from typing import Callable, Sequence, TypeVar

from ..search.reserve import RunCosts, rounds_that_fit

T = TypeVar("T")


def lineup_that_settles(candidates: Sequence[T], *, running: Callable[[T], bool],
                        default_running: bool, costs: RunCosts | None, time_s: float,
                        rounds: int) -> list[T]:
    """The first candidates (fastest first, as search/lineup.py orders them) whose lineup beside
    the default launch holds `rounds` rounds in `time_s`, with the margin of their spread; the
    leader alone when none does (it gets the rounds that fit). All of them when nothing was
    measured to price the runs with."""
    if costs is None or not candidates:
        return list(candidates)
    for n in range(len(candidates), 0, -1):
        ups = [default_running] + [running(c) for c in candidates[:n]]
        if rounds_that_fit(costs, ups, time_s) >= rounds:
            return list(candidates[:n])
    return list(candidates[:1])
