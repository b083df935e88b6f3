"""The search's candidates: which measured configurations go on to verification.

Verification (recommend/verify.py) re-runs every candidate beside the default launch for several
rounds, so each candidate costs rounds x the trial's length, and the search keeps that time back
(loop.reserve). With minute-long trials three rounds of a candidate are three launches the search
could have made. A candidate whose measurement is at most half the leader's cannot win those
rounds: a quiet re-run moved single measurements by up to 18% here, and one under a CPU hog by
47% (benchmarks/results/verification_spread.json), never by 2x. It is left out; so a leader whose
math fails its seeded confirmation may hand over to the default launch rather than to a far
slower configuration of another class. The run_cpu heuristic stays in whenever it is feasible:
the report's comparison with it is one of the verified figures; so does the default launch
compiled, where the space offers compile, as one candidate more (issue 59).
"""
from __future__ import annotations

from typing import Iterable

from ..config import Config
from ..study.records import Record, Role

# A candidate measured below this share of the leader's throughput is not verified.
CLOSE_TO_LEADER = 0.5


def pick_candidates(records: Iterable[Record], n: int = 3) -> list[Record]:
    """Up to n of the fastest feasible configurations (accuracy within tolerance) within
    CLOSE_TO_LEADER of the fastest, excluding the default launch, the fastest of each math class
    first; the run_cpu heuristic joins when it is feasible, to report the speedup over it."""
    # a trial stopped early was losing by construction: an estimate, never a candidate
    ok = [r for r in records if r.feasible and r.throughput and r.role != Role.DEFAULT
          and r.config != Config() and not r.result.stopped_early]
    ok.sort(key=lambda r: r.throughput, reverse=True)
    top, seen = [], set()
    for r in ok:
        if r.config.key() not in seen:
            seen.add(r.config.key())
            top.append(r)
    run_cpu = next((r for r in top if r.role == Role.RUN_CPU), None)
    compiled = next((r for r in top if r.role == Role.DEFAULT_COMPILED), None)
    top = [r for r in top if r is not compiled]
    if top:
        top = [r for r in top if r.throughput >= CLOSE_TO_LEADER * top[0].throughput]
    # The fastest of each math class first: a class that fails its seeded confirmation takes
    # all its configurations with it, and the next class must then still be in the lineup. And
    # within a class the fastest with and without compile: a compile that does not pay at the
    # user's run length hands over to the eager one (recommend/weigh.py).
    firsts, classes = [], set()
    for r in top:
        cls = (r.result.math_class, r.config.compile)
        if cls[0] is not None and cls not in classes:
            classes.add(cls)
            firsts.append(r)
    picked = (firsts + [r for r in top if r not in firsts])[:n]
    if run_cpu is not None and run_cpu not in picked:
        picked = picked[:max(1, n - 1)] + [run_cpu]
    return picked + [compiled] if compiled is not None else picked
