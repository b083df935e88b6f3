"""The seeded confirmation of a recommendation that changes the math, and what it costs.

The search judges a class on the seeds the default's runs used (DEFAULT_SEEDS): a screening,
biased by the choice it made on those very seeds, that never recommends. Before a class that
trains differently is recommended, default and candidate run new seeds side by side at the
study's one length: one look (quality/looks.py), its number of pairs fixed from the screening
before the first runs (looks.plan_pairs), judged on the new seeds alone at looks.LOOK_ALPHA, once.
A study opens at most looks.MOST_LOOKS looks, so a class that truly loses exactly the tolerance
is accepted in at most 5% of studies, family-wise over its candidates and `verify --quality`
(benchmarks/accuracy/procedure.py measures it, selection included).

A class whose drop already stands beyond the tolerance on the search's seeds, or that failed or
spiked on one, is not confirmed: more seeds cannot show it. Neither is one the time left cannot
hold; both are named, with what settling them would cost, and the command that does it when it
would run.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

from ..config import Config, describe_changes
from ..progress import SILENT, Progress
from .evidence import QualityBook
from .gate import pairs_to_show, showable
from .looks import (LEAST_LOOK_PAIRS, LOOK_ALPHA, LOOK_SEEDS, PLAN_INFLATE, MOST_LOOK_PAIRS, MOST_LOOKS, MOST_SETTLE_PAIRS,
                    block, plan_pairs)
from .verdict import QualityStatus, QualityVerdict

# What settles a class the confirmation could not show, as the summary names it.
SETTLE_COMMAND = "autotune verify --quality"
CONFIRM_BLOCK = 1   # the confirmation's new seeds: 100.. (looks.block)
# Of the time left, what a look leaves unplanned for its runs' spread, once verification has said
# how many rounds must follow it (Confirmation.rounds_after).
LOOK_MARGIN = 0.05


def confirm_quality(book: QualityBook, config: Config, *, time_left: Callable[[], float],
                    progress: Progress = SILENT,
                    base_launch: Config | None = None, leave_s: float = 0.0,
                    most_pairs: int = MOST_LOOK_PAIRS) -> QualityVerdict:
    """Confirm, before recommending it, that a configuration which changes the math trains as
    well as the default launch: one look of new seeds (CONFIRM_BLOCK), default and candidate side
    by side (D C D C ...), as many pairs as planned from the screening (at most `most_pairs`, as
    many as the time left holds with `leave_s` after), judged on them alone. A configuration with
    the default's math needs nothing; a class already decided by a look (a resumed search) is
    not looked at again. The verdict's `why` is the line the recommendation shows."""
    cls = book.class_of(config)
    changes = describe_changes(config, none="default")
    if cls == book.class_of(book.base):
        d_now = book.default_sample()
        return QualityVerdict(status=QualityStatus.WITHIN, math_class=cls, sample=d_now, why=(
            f"same math as the default launch (quality {d_now.describe()}, {d_now.n} seeds)"
            if d_now else "same math as the default launch"))
    before = book.verdict(config)
    g = before.gate
    if g is not None and g.look or before.status in (QualityStatus.BEYOND, QualityStatus.FAILED) \
            or g is not None and (g.failed or g.spiked or g.drop_pp > g.tolerance_pp):
        return _stated(book, config, before, f"{changes}: accuracy ")
    plan = _stored_plan(book, config) or _fitted_plan(
        book, config, look_pairs(book, config, most_pairs), time_left() - leave_s)
    seeds = [CONFIRM_BLOCK * LOOK_SEEDS + i for i in range(plan)]
    opened = any(block(s) == CONFIRM_BLOCK for s in book.evidence(config).runs) \
        if book.evidence(config) else False
    todo = [s for s in seeds if book.missing_seeds(config, (s,)) or
            book.missing_seeds(book.base, (s,))]
    need = confirmation_cost(book, config, len(todo))
    why_not = None
    if not opened and book.looks_spent() >= MOST_LOOKS:
        why_not = f"the study's {MOST_LOOKS} looks at new seeds are spent"
    elif need + leave_s > time_left():
        why_not = (f"{len(todo)} more paired seeds need about {need:.0f}s, more than the budget "
                   "left")
    if why_not:
        return QualityVerdict(status=QualityStatus.PENDING, math_class=cls, gate=g,
                              sample=before.sample, why=(
            f"{changes} not confirmed: {why_not}" + (f"; on the search's seeds: {before.claim}"
                                                     if g is not None else "")))
    # the default's side runs on the quickest launch of its math (`base_launch`): the same
    # training, in a fraction of the time where the default launch starves (a GPU's data path)
    base = base_launch if base_launch is not None and \
        book.class_of(base_launch) == book.class_of(book.base) else book.base
    _pairs(book, (base, config), todo, progress, plan)
    after = book.verdict(config)
    if after.gate is None:
        return QualityVerdict(status=QualityStatus.FAILED, math_class=cls, why=(
            f"{changes} not confirmed: confirmation runs failed"))
    return _stated(book, config, after, "", new=len(todo))


def _fitted_plan(book: QualityBook, config: Config, want: int, time_s: float) -> int:
    """The pairs a new look plans: `want`, or as many as `time_s` holds when fewer, but at least
    LEAST_LOOK_PAIRS. Decided before its first run from the time alone, never from what its
    runs show, so the look's error stays LOOK_ALPHA; a shorter look only shows less often (a
    5-minute search's look of 8 pairs that did not fit left the class unconfirmed, and its
    time went to rounds of launches in the default's math)."""
    per_pair = confirmation_cost(book, config, 1)
    if per_pair <= 0 or confirmation_cost(book, config, want) <= time_s:
        return want
    return max(LEAST_LOOK_PAIRS, min(want, int(time_s // per_pair)))


def _stored_plan(book: QualityBook, config: Config) -> int | None:
    """The plan of a confirmation look this class already opened (a search resumed after a
    crash finishes it as planned)."""
    ev = book.evidence(config)
    plans = [int(r["plan"]) for s, r in (ev.runs.items() if ev else ())
             if block(s) == CONFIRM_BLOCK and r.get("plan")]
    return max(plans) if plans else None


def _pairs(book: QualityBook, sides: tuple[Config, Config], seeds: list[int],
           progress: Progress, plan: int) -> None:
    """Both sides' runs of `seeds`, interleaved (D C D C ...), so a drift in the machine hits
    both alike; a run already stored is not repeated. The candidate stops at its first failure
    (it can no longer be shown)."""
    for seed in seeds:
        for c in sides:
            if book.missing_seeds(c, (seed,)):
                progress.confirm_start(config=c, seed=seed)
                book.measure(c, (seed,), plan=plan if c is sides[1] else None)
        cand = book.evidence(sides[1])
        if cand is not None and cand.failures():
            return


def _stated(book: QualityBook, config: Config, v: QualityVerdict, head: str,
            new: int = 0) -> QualityVerdict:
    """`v` with its `why`: the line a recommendation (or a refusal) shows."""
    d = book.default_sample(v.gate.seeds if v.gate else None)
    c = v.sample
    fresh = f", {new} of them new, side by side" if new else ""
    corr = f"; correlation {v.gate.correlation:.2f}" if v.gate and v.gate.correlation is not None \
        else ""
    length = f" x {book.length} samples" if book.length else ""
    text = (f"{head}accuracy {c.describe() if c else '-'} (default "
            f"{d.describe() if d else '-'}, {v.gate.n if v.gate else 0} paired seeds{length}"
            f"{fresh}{corr}): {v.claim}")
    text += settle_advice(book, v)
    return QualityVerdict(status=v.status, math_class=v.math_class, sample=c, gate=v.gate,
                          why=text)


def settle_advice(book: QualityBook, v: QualityVerdict) -> str:
    """'; to settle it: autotune verify --quality' where that command would look at the class
    (not shown, more seeds could show it, and a look is left), else what stands in its way."""
    if v.status != QualityStatus.NOT_SHOWN or v.gate is None:
        return ""
    if v.gate.failed or v.gate.spiked:
        return "; no number of paired seeds would show it within the tolerance"
    if book.looks_spent() >= MOST_LOOKS:
        return f"; the study's {MOST_LOOKS} looks at new seeds are spent"
    if not showable(v.gate):
        return "; no number of paired seeds would show it within the tolerance"
    return f"; to settle it: {SETTLE_COMMAND}"


def confirmation_cost(book: QualityBook, lead: Config | None, seeds: int | None = None) -> float:
    """Seconds the confirmation of the leader `lead` would take: `seeds` new paired seeds
    (the least a look plans when None; 0 for the default's math)."""
    if lead is None or book.class_of(lead) == book.class_of(book.base):
        return 0.0
    per_run = (book.run_seconds(book.base) or 0.0) + (book.run_seconds(lead) or 0.0)
    return per_run * (LEAST_LOOK_PAIRS if seeds is None else seeds)


def settling_cost(book: QualityBook, config: Config) -> float:
    """Seconds the look that could show `config`'s class within the tolerance would take (the
    pairs looks.plan_pairs would plan for it, `verify --quality`'s most where its planning spread
    asks for more); inf when no number of seeds would (its drop is at or beyond the tolerance, or
    a seed failed or spiked). A 5-minute search's bf16, 0.44 pp down with one seed 2.1 pp down,
    had been called beyond any number of seeds, "its measured drop at or past" the tolerance."""
    v = book.verdict(config)
    if v.gate is None:
        return confirmation_cost(book, config)
    if not showable(v.gate):
        return math.inf
    want = pairs_to_show(v.gate, MOST_SETTLE_PAIRS, alpha=LOOK_ALPHA, inflate=PLAN_INFLATE)
    return confirmation_cost(book, config, max(LEAST_LOOK_PAIRS, want or MOST_SETTLE_PAIRS))


def look_pairs(book: QualityBook, config: Config, most: int = MOST_LOOK_PAIRS) -> int:
    """Pairs a new look at `config`'s class plans now, from its screening (looks.plan_pairs, at
    most `most`): the one count of them, which confirm_quality fits to the time left and the
    search keeps time for (search/budget.confirmation_reserve)."""
    return plan_pairs(book.verdict(config).gate, most)


def confirmation_reserve(book: QualityBook) -> float:
    """What verification rounds past the asked ones must leave for a confirmation: the
    default's side of it and the candidate's, as long as the default's runs."""
    return 2 * (book.run_seconds(book.base) or 0.0) * LEAST_LOOK_PAIRS


class Confirmation:
    """The confirmation as the recommender sees it: one verdict per math class (a class is
    confirmed once), what verification must leave for it, and the noise floor it stands on."""

    def __init__(self, book: QualityBook, *, time_left: Callable[[], float],
                 progress: Progress = SILENT, base_launch: Config | None = None,
                 leave_s: float = 0.0,
                 rounds_cost: Callable[[int], float] | None = None) -> None:
        """`leave_s`: what the winner's rounds after a confirmation need, until verification
        says how many they are (`rounds_after`), each priced by `rounds_cost`."""
        self.book, self.time_left, self.progress = book, time_left, progress
        self.base_launch = base_launch
        self.leave_s = self.most_leave_s = leave_s
        self.rounds_cost = rounds_cost
        # (the configuration's changes, seconds) of each confirmation the time left could not
        # hold, or that ended not shown: what settling them would cost (search/account.py)
        self.unconfirmed: list[tuple[str, float]] = []
        self._verdicts: dict[str, QualityVerdict] = {}

    def verdict(self, config: Config) -> QualityVerdict:
        cls = self.book.class_of(config)
        if cls not in self._verdicts:
            self._verdicts[cls] = confirm_quality(self.book, config, time_left=self.time_left,
                                                  progress=self.progress,
                                                  base_launch=self.base_launch,
                                                  leave_s=self.leave_s)
            status = self._verdicts[cls].status
            if status in (QualityStatus.PENDING, QualityStatus.NOT_SHOWN):
                self.unconfirmed.append((describe_changes(config, none="default"),
                                         settling_cost(self.book, config)))
        return self._verdicts[cls]

    def rounds_after(self, needs: Sequence[tuple[Config, int]]) -> None:
        """Verification's word, before it asks for the first of `needs` (configuration, rounds
        its ratio needs to settle, fastest first): the winner after this confirmation is that
        one, or should its class not be shown, the first after it of another class, so the
        confirmation leaves the rounds the needier of the two still lacks, but never more than
        it left before verification said (`leave_s` as given: a search whose fallback needed
        all 12 rounds left its look no time at all). A fixed 5 rounds held a 5-minute search's
        bf16 look to 4 pairs (upper bound 1.19 pp, not shown) where the ratios had settled in
        the asked rounds, and 40 s went to rounds of a settled figure."""
        if self.rounds_cost is None or not needs:
            return
        rounds, cls = needs[0][1], self.book.class_of(needs[0][0])
        other = next((n for c, n in needs[1:] if self.book.class_of(c) != cls), 0)
        most = max(rounds, other)
        # and a margin for the runs' own spread (a pair ran 14-16 s in one look)
        self.leave_s = min(self.most_leave_s,
                           self.rounds_cost(most) + LOOK_MARGIN * max(0.0, self.time_left()))

    def reserve(self, configs: Sequence[Config]) -> float:
        """Seconds verification rounds past the asked ones must leave (confirmation_reserve),
        while one of `configs` that changes the math may still be confirmed in the time left;
        0 once none can be (an 8-minute search across hosts kept 3 minutes for a confirmation
        that needed 219 s and so never ran, and stopped its rounds unsettled)."""
        left = self.time_left()
        if any(0 < confirmation_cost(self.book, c) <= left for c in configs
               if self.book.class_of(c) not in self._verdicts):
            return confirmation_reserve(self.book)
        return 0.0

    def noise_floor(self) -> str | None:
        """The default launch's quality over its seeds, as the recommendation shows it."""
        d = self.book.default_sample()
        return f"default launch quality {d.describe()} over {d.n} seeds" if d else None
