"""One verdict per class from its stored runs, the same for every reader (the search, a resumed
or shared search, `report`, `verify`, the dashboard), and the looks that decide it (issue 60).

**Every seed counts.** A run of the class that failed, timed out or gave no finite quality
where the default's same seed did not fail is evidence against the class: the class is not shown
at best, whatever its other seeds say. A failed default seed is the default's: its pair is left
out and named.

**One error rate, spent over planned looks.** The search's own seeds (block 0, seeds below
LOOK_SEEDS) chose the class: a test on them is a screening, biased by that choice, and never
recommends. A class is recommended only from a *look*: a block of new seeds (100..199 the
search's confirmation, 200.., 300.. each `autotune verify --quality`), its number of pairs fixed
before the first of them runs (stored on each of its runs as "plan") and judged on those seeds
alone, at the one-sided level LOOK_ALPHA. A study opens at most MOST_LOOKS looks in all (one per
class the search confirms, up to 3, and `verify --quality`'s), and a look opens only while the
class's drop measured so far is within the tolerance: for a class that truly loses exactly the
tolerance that is at most half the time, and a look's seeds are new, so a union bound over the
looks gives MOST_LOOKS x LOOK_ALPHA / 2 = GATE_ALPHA of studies accepting it, family-wise
(benchmarks/accuracy/procedure.py measures the whole procedure, selection included: 4.2-4.3%). A look cut short (a crash) decides nothing.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Protocol

from .gate import GATE_ALPHA, DropBound, Shown, paired


class ClassEvidence(Protocol):
    """What a judge reads of a class's runs (quality/evidence.ClassEvidence)."""
    math_class: str
    runs: dict[int, dict[str, Any]]

    def by_seed(self) -> dict[int, float]: ...
    def failures(self) -> dict[int, str]: ...
    def spread_pp(self) -> float | None: ...

LOOK_SEEDS = 100             # seeds per block: block b is seeds b*100 .. b*100+99
MOST_LOOKS = 4               # looks a study opens in all, over every class
LOOK_ALPHA = 2 * GATE_ALPHA / MOST_LOOKS
LEAST_LOOK_PAIRS = 4         # a look planned with fewer would rarely show anything
MOST_LOOK_PAIRS = 9          # the search's confirmation (3 + 9 = the 12 pairs of round 6)
MOST_SETTLE_PAIRS = 16       # `verify --quality`, which the user gives its own budget
# A look is planned as if the spread were this much wider than the screening's few seeds
# measured (3 seeds underestimate it often): fewer looks end not shown for want of pairs.
PLAN_INFLATE = 1.6


def block(seed: int) -> int:
    return seed // LOOK_SEEDS


def judge(base: ClassEvidence, ev: ClassEvidence, tolerance_pp: float, *,
          lower_is_better: bool = False) -> DropBound | None:
    """The class's test against the default's runs: the look that accepts it, else the last
    complete look, else the screening on the search's seeds; with every failed, diverged or
    spiked seed of all its runs carried along (any one makes it not shown at best). None while
    the two share no seed."""
    d, c = base.by_seed(), ev.by_seed()
    kw = dict(lower_is_better=lower_is_better, spread_pp=base.spread_pp())
    whole = paired(d, c, tolerance_pp, failed=ev.failures(), default_failed=base.failures(),
                   **kw)
    if not whole.seeds and not whole.failed:
        return None
    decided = [dataclasses.replace(
        paired(d, c, tolerance_pp, seeds=seeds, alpha=LOOK_ALPHA, failed=ev.failures(),
               default_failed=base.failures(), **kw), look=block(seeds[0]))
        for seeds in complete_looks(base, ev)]
    chosen = next((g for g in decided if g.answer == Shown.WITHIN), None) or \
        (decided[-1] if decided else None)
    if chosen is None:
        chosen = paired(d, c, tolerance_pp, seeds=tuple(s for s in set(d) | set(c)
                                                        | set(ev.failures()) if block(s) == 0),
                        failed=ev.failures(), default_failed=base.failures(), **kw)
    return _with_all_seeds(chosen, whole)


def _with_all_seeds(chosen: DropBound, whole: DropBound) -> DropBound:
    """`chosen` carrying the failures, divergences and spikes of every seed."""
    return dataclasses.replace(
        chosen, failed=_union(chosen.failed, whole.failed),
        default_failed=_union(chosen.default_failed, whole.default_failed),
        diverged=tuple(sorted(set(chosen.diverged) | set(whole.diverged))),
        spiked=tuple(sorted(set(chosen.spiked) | set(whole.spiked), key=lambda p: -p[1])))


def _union(a: Iterable[tuple[int, str]], b: Iterable[tuple[int, str]]) -> tuple:
    return tuple(sorted(dict([*a, *b]).items()))


def complete_looks(base: ClassEvidence, ev: ClassEvidence) -> list[tuple[int, ...]]:
    """The seeds of each look of `ev`'s class that ran all its planned pairs (a run that failed
    counts as run), in block order."""
    out = []
    for b in sorted({block(s) for s in ev.runs} - {0}):
        mine = {s: r for s, r in ev.runs.items() if block(s) == b and not r.get("samples")}
        plan = max((int(r.get("plan") or 0) for r in mine.values()), default=0) or len(mine)
        both = tuple(sorted(s for s in mine if s in base.runs))
        if both and len(both) >= plan:
            out.append(both)
    return out


def looks_spent(classes: Iterable[ClassEvidence], default_class: str) -> int:
    """Looks a study has opened: each (class, block) with a run of a class that is not the
    default's, past the search's own seeds."""
    return sum(len({block(s) for s in ev.runs} - {0}) for ev in classes
               if ev.math_class != default_class)


def next_block(classes: Iterable[ClassEvidence]) -> int:
    """The first block no run of the study uses, past the confirmation's (2 at least): the new
    seeds of a `verify --quality` look."""
    return max([2] + [block(s) + 1 for ev in classes for s in ev.runs])


def plan_pairs(pilot: DropBound | None, most: int) -> int:
    """Pairs a look plans from what the class showed so far (`pilot`): the fewest that would show
    its drop within the tolerance at LOOK_ALPHA were its spread PLAN_INFLATE times the measured
    one and no less than the default's own seed-to-seed spread (3 seeds often measure a paired
    spread far too small: a look planned on it alone ended not shown for want of pairs), at
    least LEAST_LOOK_PAIRS, else `most`."""
    from .gate import pairs_to_show
    want = pairs_to_show(pilot, most, alpha=LOOK_ALPHA, inflate=PLAN_INFLATE,
                         least_sd=pilot.spread_pp or 0.0) if pilot is not None else None
    return max(LEAST_LOOK_PAIRS, min(most, want or most))
