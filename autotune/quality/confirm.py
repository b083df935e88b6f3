"""The seeded confirmation of a recommendation that changes the math, and what it costs.

The search judges a class on the seeds the default's runs used (DEFAULT_SEEDS). Before a class
that trains differently is recommended, default and candidate run new seeds (CONFIRM_SEEDS) side
by side at the study's one length, and the class is judged on every pair it then has: the search's
and the new ones. Acceptance needs the pooled test to show the drop within the tolerance, so a
class that truly loses more is accepted in at most 5% of confirmations however it fared on the
search's seeds (passing both is rarer than passing the last); the new seeds guard against a class
that looked good on the seeds it was chosen on.

A class whose drop already stands beyond the tolerance on the search's seeds is not confirmed:
more seeds would only say so again. Neither is one the time left cannot hold; both are named, with
what settling them would cost, and the command that does it.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

from ..config import Config, describe_changes
from ..progress import SILENT, Progress
from .evidence import CONFIRM_SEEDS, QualityBook
from .gate import pairs_to_show
from .verdict import QualityStatus, QualityVerdict

# What settles a class the confirmation could not show, as the summary names it.
SETTLE_COMMAND = "autotune verify --quality"
# The most paired seeds a confirmation grows a class to while more could show it (the search's
# 3, the 3 new ones, then up to 6 more): at the built-in cnn's 5-minute length this lifted the
# share of bf16 shown within from 31% to 47%, at its 10-minute length from 97% to 100%, and a
# class losing 2 pp stayed accepted in 0.4% (benchmarks/accuracy/gate.py, "what_if"; its
# repeated looks take a class at exactly the tolerance from 5% to 7.6%).
MOST_PAIRS = 12


def confirm_quality(book: QualityBook, config: Config, *, time_left: Callable[[], float],
                    progress: Progress = SILENT,
                    base_launch: Config | None = None,
                    seeds: tuple[int, ...] = CONFIRM_SEEDS, leave_s: float = 0.0,
                    most_pairs: int = MOST_PAIRS) -> QualityVerdict:
    """Confirm, before recommending it, that a configuration which changes the math trains as
    well as the default launch: `seeds` new seeds, default and candidate side by side (D C D C
    ...), at the study's length, then the paired test on every seed both sides have. While the
    class is still not shown and more seeds could show it (gate.pairs_to_show), more pairs follow,
    up to `most_pairs` in all, as long as the time left holds them and `leave_s` after (the
    winner's rounds). A configuration with the default's math needs nothing. The verdict's `why`
    is the line the recommendation shows (accepted or not)."""
    cls = book.class_of(config)
    changes = describe_changes(config, none="default")
    if cls == book.class_of(book.base):
        d_now = book.default_sample()
        return QualityVerdict(status=QualityStatus.WITHIN, math_class=cls, sample=d_now, why=(
            f"same math as the default launch (quality {d_now.describe()}, {d_now.n} seeds)"
            if d_now else "same math as the default launch"))
    before = book.verdict(config)
    if before.status == QualityStatus.BEYOND or (before.gate is not None and
                                                 before.gate.drop_pp > before.gate.tolerance_pp):
        return _stated(book, config, before, f"{changes}: accuracy ")
    todo = [s for s in seeds if book.missing_seeds(config, (s,)) or
            book.missing_seeds(book.base, (s,))]
    need = confirmation_cost(book, config, len(todo))
    if need > time_left():
        return QualityVerdict(status=QualityStatus.PENDING, math_class=cls, gate=before.gate,
                              sample=before.sample, why=(
            f"{changes} not confirmed: {len(todo)} more paired seeds need about {need:.0f}s, "
            f"more than the budget left" + (f"; on the search's seeds: {before.claim}"
                                            if before.gate is not None else "")))
    # the default's side runs on the quickest launch of its math (`base_launch`): the same
    # training, in a fraction of the time where the default launch starves (a GPU's data path)
    base = base_launch if base_launch is not None and \
        book.class_of(base_launch) == book.class_of(book.base) else book.base
    _pairs(book, (base, config), todo, progress)
    after = book.verdict(config)
    extra = iter(range(max(seeds) + 1, max(seeds) + 1 + most_pairs))
    while after.status == QualityStatus.NOT_SHOWN and after.gate is not None \
            and after.gate.n < most_pairs and pairs_to_show(after.gate, most=most_pairs):
        want = pairs_to_show(after.gate, most=most_pairs) - after.gate.n
        if confirmation_cost(book, config, want) + leave_s > time_left():
            break
        more = [next(extra) for _ in range(want)]
        _pairs(book, (base, config), more, progress)
        todo += more
        after = book.verdict(config)
    if after.status == QualityStatus.FAILED or after.gate is None:
        return QualityVerdict(status=QualityStatus.FAILED, math_class=cls, why=(
            f"{changes} not confirmed: confirmation runs failed"))
    return _stated(book, config, after, "", new=len(todo))


def _pairs(book: QualityBook, sides: tuple[Config, Config], seeds: list[int],
           progress: Progress) -> None:
    """Both sides' runs of `seeds`, interleaved (D C D C ...), so a drift in the machine hits
    both alike; a run already stored is not repeated."""
    for seed in seeds:
        for c in sides:
            if book.missing_seeds(c, (seed,)):
                progress.confirm_start(config=c, seed=seed)
                book.measure(c, (seed,))


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
    if v.status == QualityStatus.NOT_SHOWN:
        text += f"; to settle it: {SETTLE_COMMAND}"
    return QualityVerdict(status=v.status, math_class=v.math_class, sample=c, gate=v.gate,
                          why=text)


def confirmation_cost(book: QualityBook, lead: Config | None, seeds: int | None = None) -> float:
    """Seconds the confirmation of the leader `lead` would take: `seeds` new paired seeds
    (CONFIRM_SEEDS' count when None; 0 for the default's math)."""
    if lead is None or book.class_of(lead) == book.class_of(book.base):
        return 0.0
    per_run = (book.run_seconds(book.base) or 0.0) + (book.run_seconds(lead) or 0.0)
    return per_run * (len(CONFIRM_SEEDS) if seeds is None else seeds)


def settling_cost(book: QualityBook, config: Config) -> float:
    """Seconds the paired seeds that would show `config`'s class within the tolerance would take,
    beyond those it has (gate.pairs_to_show); inf when no number of seeds would (its drop is at
    or beyond the tolerance)."""
    v = book.verdict(config)
    unconfirmed = len([s for s in CONFIRM_SEEDS if book.missing_seeds(config, (s,))])
    if v.gate is None:
        return confirmation_cost(book, config)
    want = pairs_to_show(v.gate)   # the new seeds of a confirmation are the least it takes
    return math.inf if want is None else \
        confirmation_cost(book, config, max(unconfirmed, want - v.gate.n))


def confirmation_reserve(book: QualityBook) -> float:
    """What verification rounds past the asked ones must leave for a confirmation: the
    default's side of it and the candidate's, as long as the default's runs."""
    return 2 * (book.run_seconds(book.base) or 0.0) * len(CONFIRM_SEEDS)


class Confirmation:
    """The confirmation as the recommender sees it: one verdict per math class (a class is
    confirmed once), what verification must leave for it, and the noise floor it stands on."""

    def __init__(self, book: QualityBook, *, time_left: Callable[[], float],
                 progress: Progress = SILENT, base_launch: Config | None = None,
                 leave_s: float = 0.0) -> None:
        self.book, self.time_left, self.progress = book, time_left, progress
        self.base_launch = base_launch
        self.leave_s = leave_s   # what the winner's rounds after a confirmation need
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
