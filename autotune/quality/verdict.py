"""The accuracy check's answer for one configuration, typed: what the search stores on a trial,
the recommender confirms and the report shows.

A verdict is about a math class (quality/math_class.py): every configuration of the class gets
the same one. `status` is a QualityStatus: what the class's paired runs *showed*
(quality/gate.py), or why nothing was shown yet. On a stored trial the verdict is kept as the
TrialResult's `quality*` fields (`trial_fields`), and read back with `stored_verdict`.

Studies stored before round 6 hold "accepted" and "rejected", judged by a test that accepted
whatever its runs could not resolve. They are read as "not shown (older rule)" and "beyond
(older rule)" until their class is judged again on its stored runs; nothing stored is rewritten.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..result import StrEnum, TrialResult
from .gate import DropBound, Sample, Shown, single_run


class QualityStatus(StrEnum):
    """Where a configuration's quality stands; the values are stored on trials (user attr
    "quality", FAILED with its cause: see `label`)."""
    WITHIN = Shown.WITHIN.value        # shown to lose at most the tolerance (or the default's math)
    BEYOND = Shown.BEYOND.value        # shown to lose more, or a seed diverged
    NOT_SHOWN = Shown.NOT_SHOWN.value  # measured, and the runs cannot tell
    PENDING = "pending"                # not measured yet, or not confirmed in the time left
    FAILED = "failed"                  # its quality runs failed


_STATUSES = frozenset(s.value for s in QualityStatus)
# How a failed class is written on a stored trial: "quality run failed: <why>".
_FAILED_PREFIX = "quality run failed: "
# What studies of the older rule stored, and what it is read as now.
_OLDER_RULE = {"accepted": QualityStatus.NOT_SHOWN, "rejected": QualityStatus.BEYOND}
OLDER_RULE = "older rule"


@dataclass(frozen=True, kw_only=True)
class QualityVerdict:
    status: QualityStatus             # (its value is accepted too, and turned into one)
    math_class: str | None = None     # None: a script's own accuracy, judged per trial
    sample: Sample | None = None      # the class's seeded qualities behind the verdict
    gate: DropBound | None = None     # the paired test, when the class was tested
    why: str = ""                     # one line: a failure's cause, a confirmation's evidence
    older_rule: bool = False          # read from a study judged by the older rule

    def __post_init__(self) -> None:
        if self.status not in _STATUSES:
            raise ValueError(f"status={self.status!r}: choose one of "
                             f"{', '.join(s.value for s in QualityStatus)}")
        object.__setattr__(self, "status", QualityStatus(self.status))

    @property
    def accepted(self) -> bool:
        """Shown to train within the tolerance: the only verdict a recommendation may rest on."""
        return self.status == QualityStatus.WITHIN and not self.older_rule

    @property
    def contends(self) -> bool:
        """May lead the search and be a candidate for the seeded confirmation: shown within, or
        not shown yet with a drop inside the tolerance (more seeds may show it). Only `accepted`
        may be recommended as keeping accuracy."""
        return self.status in (QualityStatus.WITHIN, QualityStatus.NOT_SHOWN) \
            and not self.older_rule and self.violation <= 0

    @property
    def mean(self) -> float | None:
        """The class's mean seeded quality (None when not measured)."""
        return self.sample.mean if self.sample is not None else None

    @property
    def violation(self) -> float:
        """The constraint the sampler sees: > 0 exactly when the class may not lead (shown
        beyond, by how far its bound is past the tolerance; not shown with its measured drop past
        the tolerance, by that much; a failed class, or one with a failed or spiked seed, by 1 or
        more), <= 0 otherwise. A class not shown but
        whose drop is inside the tolerance may lead: its confirmation adds the seeds that can
        show it, and it is recommended only if they do."""
        if self.status == QualityStatus.FAILED:
            return 1.0
        if self.gate is None:
            return 1.0 if self.status in (QualityStatus.NOT_SHOWN, QualityStatus.BEYOND) else 0.0
        if self.status == QualityStatus.WITHIN:
            return min(0.0, self.gate.margin_pp)
        if self.status == QualityStatus.NOT_SHOWN:
            if self.gate.failed or self.gate.spiked:   # no number of seeds can show it
                return self.gate.margin_pp
            return self.gate.drop_pp - self.gate.tolerance_pp
        return max(self.gate.margin_pp, 1e-6)

    @property
    def label(self) -> str:
        """The words a stored trial and the report show: 'within', 'not shown', 'beyond',
        'pending', a failure's line, or 'not shown (older rule)'."""
        if self.status == QualityStatus.FAILED and self.why:
            return _FAILED_PREFIX + self.why
        return f"{self.status.value} ({OLDER_RULE})" if self.older_rule else self.status.value

    @property
    def claim(self) -> str:
        """The verdict as a sentence's end: what was shown, with its bound ('within 1 pp (95%
        upper bound of the drop 0.62 pp, 6 paired seeds)'), else the label."""
        return self.gate.describe() if self.gate is not None else self.label

    def trial_fields(self) -> dict[str, Any]:
        """The TrialResult fields that store this verdict on a trial."""
        out: dict[str, Any] = {"quality": self.label}
        if self.math_class is not None:
            out["math_class"] = self.math_class
        if self.sample is not None:
            out.update(quality_sd=self.sample.sd, quality_n=self.sample.n)
        if self.gate is not None:
            out["quality_verdict"] = self.gate.describe()
        elif self.why and self.status in (QualityStatus.NOT_SHOWN, QualityStatus.BEYOND):
            out["quality_verdict"] = self.why   # e.g. a batch not worth quality runs
        return out


def judge_single_run(floor: Sample, accuracy: float, tolerance_pp: float) -> QualityVerdict:
    """A script's one reported accuracy against the default launch's seeds (gate.single_run)."""
    bound = single_run(floor, accuracy, tolerance_pp)
    return QualityVerdict(status=status_of(bound), gate=bound)


def status_of(bound: DropBound) -> QualityStatus:
    """What a test's answer makes of a class."""
    return QualityStatus(bound.answer.value)


def stored_verdict(result: TrialResult) -> QualityVerdict:
    """The verdict a trial was stored with (pending when it has none, or one not known here;
    an older rule's word as what it showed, marked)."""
    text = result.quality or QualityStatus.PENDING
    if text.startswith(_FAILED_PREFIX):
        return QualityVerdict(status=QualityStatus.FAILED, math_class=result.math_class,
                              why=text[len(_FAILED_PREFIX):])
    if text in _OLDER_RULE:
        return QualityVerdict(status=_OLDER_RULE[text], math_class=result.math_class,
                              older_rule=True)
    status = text if text in _STATUSES else QualityStatus.PENDING
    return QualityVerdict(status=status, math_class=result.math_class)


def accuracy_violation(acc: float | None, base: float | None, max_drop_pp: float) -> float:
    """Without a noise floor (a script's single numbers): > 0 when the accuracy fell more than
    the allowed percentage points below the default launch's."""
    if acc is None or base is None:
        return 1.0 if acc is None else 0.0
    return (base - acc) * 100.0 - max_drop_pp


def recommendation_claims(rec: dict[str, Any]) -> list[str]:
    """What a stored recommendation says of accuracy, line by line, for the export header, the
    dashboard's note, the report and the summary: its own claim, then each faster launch whose
    accuracy was not shown. A recommendation stored by the older rule has no claim of its own:
    it says so, as 'not shown (older rule)', unless it kept the default's math."""
    out = []
    claim = rec.get("accuracy_claim")
    if claim:
        out.append(str(claim))
    elif rec.get("accuracy") is not None and rec.get("accuracy") != rec.get("default_accuracy"):
        out.append(f"accuracy {QualityStatus.NOT_SHOWN.value} ({OLDER_RULE}): judged before the "
                   "paired test; `autotune verify --quality` judges it again")
    for u in rec.get("unproven") or ():
        where = " in the search" if u.get("in_search") else ""
        out.append(f"faster, accuracy not shown: {u.get('changes')} ran "
                   f"{float(u.get('speedup') or 0):.2f}x{where}; {u.get('why')}")
    return out
