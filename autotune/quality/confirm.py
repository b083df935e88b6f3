"""The seeded confirmation of a recommendation that changes the math, and what it costs.

The search judges a class on the seeds its noise floor used; before a class that trains
differently is recommended, it is measured again on new seeds (CONFIRM_SEEDS), default and
candidate side by side, and gated on those seeds alone.
"""
from __future__ import annotations

from typing import Callable, Sequence

from ..config import Config, describe_changes
from ..progress import SILENT, Progress
from .evidence import CONFIRM_SEEDS, QualityBook
from .verdict import QualityStatus, QualityVerdict, gate_status


def confirm_quality(book: QualityBook, config: Config, *, time_left: Callable[[], float],
                    samples: int, progress: Progress = SILENT,
                    leave_s: float = 0.0, base_launch: Config | None = None) -> QualityVerdict:
    """Confirm, before recommending it, that a configuration which changes the math trains as
    well as the default launch: new seeds, each run twice as long as the search's quality runs
    when the budget allows that and still leaves `leave_s` (else as long), default and
    candidate side by side (D C D C ...), and the same gate on those seeds alone. A
    configuration with the default's math needs nothing.
    The verdict's `why` is the line the recommendation shows (accepted or not)."""
    cls = book.class_of(config)
    d_now = book.default_sample()
    if cls == book.class_of(book.base):
        return QualityVerdict(status=QualityStatus.ACCEPTED, math_class=cls, sample=d_now, why=(
            f"same math as the default launch (quality {d_now.describe()}, {d_now.n} seeds)"
            if d_now else "same math as the default launch"))
    length, per_run = _run_length(book, config, samples, time_left() - leave_s)
    if length * per_run * len(CONFIRM_SEEDS) > time_left():
        return QualityVerdict(status=QualityStatus.PENDING, math_class=cls, why=(
            f"{describe_changes(config, none='default')} not confirmed: the seeded confirmation needs "
            f"about {per_run * len(CONFIRM_SEEDS):.0f}s, more than the budget left"))
    # the default's side runs on the quickest launch of its math (`base_launch`): the same
    # training, in a fraction of the time where the default launch starves (a GPU's data path)
    base = base_launch if base_launch is not None and \
        book.class_of(base_launch) == book.class_of(book.base) else book.base
    for seed in CONFIRM_SEEDS:   # interleaved, so a drift in the machine hits both alike
        for c in (base, config):
            progress.confirm_start(config=c, seed=seed)
            book.measure(c, (seed,), samples=samples * length)
    d, c = book.default_sample(CONFIRM_SEEDS), book.evidence(config).sample(CONFIRM_SEEDS)
    if d is None or c is None or d.n < 2 or c.n < 2:
        return QualityVerdict(status=QualityStatus.FAILED, math_class=cls, why=(
            f"{describe_changes(config, none='default')} not confirmed: confirmation runs failed"))
    v = book.gate_result(config, CONFIRM_SEEDS)
    text = (f"accuracy {c.describe()} (default {d.describe()}, {c.n} new seeds x "
            f"{samples * length} samples, side by side): "
            f"{'beyond' if v.reject else 'within'} {v.tolerance_pp:g} pp "
            f"(drop {v.drop_pp:+.2f} pp, noise {v.noise_pp:.2f} pp)")
    return QualityVerdict(status=gate_status(v), math_class=cls, sample=c, gate=v, why=text)


def _run_length(book: QualityBook, config: Config, samples: int,
                spare_s: float) -> tuple[int, float]:
    """(multiple of `samples` per confirmation run, seconds per seed): the default's
    confirmation runs, when an earlier class made them, fix the length for every class; else
    twice as long when `spare_s` holds that and, after it, the confirmation of a next class as
    long (this one refused, the next holding candidate is confirmed at the length this one sets:
    a first command spent 125 s confirming a bf16 class twice as long, 40 s on the next, both
    refused, and run_cpu's settings, the winner, had no time left to settle)."""
    base_ev = book.evidence(book.base)
    done = [r.get("samples") for k, r in (base_ev.runs.items() if base_ev else ())
            if k in CONFIRM_SEEDS and r.get("samples")]
    if done:   # the default's confirmation runs exist (an earlier class): same length, theirs
        return max(1, int(done[0]) // samples), book.run_seconds(config) or 0.0
    own = book.run_seconds(config) or 0.0
    per_run = (book.run_seconds(book.base) or 0.0) + own
    return (2 if 2 * (per_run + own) * len(CONFIRM_SEEDS) <= spare_s else 1), per_run


def confirmation_cost(book: QualityBook, lead: Config | None) -> float:
    """Seconds the confirmation of the leader `lead` would take (0 for the default's math)."""
    if lead is None or book.class_of(lead) == book.class_of(book.base):
        return 0.0
    per_run = (book.run_seconds(book.base) or 0.0) + (book.run_seconds(lead) or 0.0)
    return per_run * len(CONFIRM_SEEDS)


def confirmation_reserve(book: QualityBook) -> float:
    """What verification rounds past the asked ones must leave for a confirmation: the
    default's side of it, twice."""
    return 2 * (book.run_seconds(book.base) or 0.0) * len(CONFIRM_SEEDS)


class Confirmation:
    """The confirmation as the recommender sees it: one verdict per math class (a class is
    confirmed once), what verification must leave for it, and the noise floor it stands on."""

    def __init__(self, book: QualityBook, *, time_left: Callable[[], float], samples: int,
                 progress: Progress = SILENT, leave_s: float = 0.0,
                 base_launch: Config | None = None) -> None:
        self.book, self.time_left, self.samples, self.progress = book, time_left, samples, progress
        self.base_launch = base_launch
        # (the configuration's changes, seconds) of each confirmation the time left could not
        # hold: what a longer budget would buy (search/account.py)
        self.unconfirmed: list[tuple[str, float]] = []
        self.leave_s = leave_s   # what the winner's rounds after a confirmation need (its length)
        self._verdicts: dict[str, QualityVerdict] = {}

    def verdict(self, config: Config) -> QualityVerdict:
        cls = self.book.class_of(config)
        if cls not in self._verdicts:
            self._verdicts[cls] = confirm_quality(self.book, config, time_left=self.time_left,
                                                  samples=self.samples, progress=self.progress,
                                                  leave_s=self.leave_s,
                                                  base_launch=self.base_launch)
            if self._verdicts[cls].status == QualityStatus.PENDING:
                self.unconfirmed.append((describe_changes(config, none="default"),
                                         confirmation_cost(self.book, config)))
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
