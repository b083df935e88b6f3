"""Interleaved rounds: every configuration of a lineup in turn, the order reversed every other
round, so that slow drift of the machine hits them all alike. Verification and `autotune compare`
measure through this."""
from __future__ import annotations

from typing import Callable

from ..config import Config
from ..progress import SILENT, Progress
from ..result import Evaluate, TrialResult

# Verification goes on past the asked rounds, while unsettled, up to this many times as many.
MAX_ROUNDS_FACTOR = 4
# The most rounds `autotune verify` may be asked for: a round of a few windows takes a minute or
# more, and past a hundred the spread left is the machine's (12 proposed at most, settle.py).
MAX_ASKED_ROUNDS = 100


def interleave(lineup: list[tuple[str, Config]], evaluate: Evaluate, *, rounds: int,
               time_left: Callable[[], float] = lambda: float("inf"),
               progress: Progress = SILENT, max_rounds: int | None = None,
               enough: Callable[[list[list[TrialResult]]], bool] = lambda results: True,
               keep_s: float | Callable[[], float] = 0.0, start: int = 0,
               round_s: float = 0.0, spare_rounds: float = 2.0) -> list[list[TrialResult]]:
    """Rounds of every (role, config) in turn, the order reversed every other round (A B C,
    C B A, ...: position effects cancel over pairs of rounds); stops early when another round
    won't fit. After `rounds` rounds, more (up to `max_rounds`) until `enough(results)`, each
    only while `spare_rounds` rounds' time is left beyond `keep_s` (asked anew before each). `start`
    rounds were measured before (numbering and order go on from them; `round_s`: what one of
    this lineup's rounds took then). Returns, per lineup entry, its evaluation in each round
    completed here. Verification and `autotune compare` both measure through this."""
    results: list[list[TrialResult]] = [[] for _ in lineup]
    done = 0
    for rnd in range(start, max(rounds, max_rounds or rounds)):
        if (done or round_s) and time_left() < round_s * 1.1:
            break
        keep = keep_s() if callable(keep_s) else keep_s
        if rnd >= rounds and (enough(results) or time_left() - keep < round_s * spare_rounds):
            break
        order = list(range(len(lineup)))
        if rnd % 2:
            order.reverse()
        spent = 0.0
        for i in order:
            role, config = lineup[i]
            progress.verify_start(config=config, role=role, round=rnd + 1, rounds=rounds,
                                  max_rounds=max(rounds, max_rounds or rounds))
            ev = evaluate(config, "throughput")
            spent += ev.seconds
            results[i].append(ev)
        done += 1
        round_s = max(round_s, spent)
    return results


def round_limit(rounds: int, max_rounds: int | None) -> int:
    """The most rounds a verification of `rounds` rounds may take while unsettled."""
    return max(rounds, max_rounds if max_rounds is not None else MAX_ROUNDS_FACTOR * rounds)
