"""The accuracy check's answer for one configuration, typed: what the search stores on a trial,
the recommender confirms and the report shows.

A verdict is about a math class (quality/math_class.py): every configuration of the class gets
the same one. `status` is a QualityStatus; `gate` holds the Welch test's numbers when the class
was gated. On a stored trial the verdict is kept as the TrialResult's `quality*` fields
(`trial_fields`), and read back with `stored_verdict`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..result import StrEnum, TrialResult
from .gate import GateResult, Sample, single_run_gate


class QualityStatus(StrEnum):
    """Where a configuration's quality stands; the values are stored on trials (user attr
    "quality", FAILED with its cause: see `label`)."""
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    PENDING = "pending"      # not measured yet, or not confirmed in the time left
    FAILED = "failed"        # its quality runs failed


_STATUSES = frozenset(s.value for s in QualityStatus)
# How a failed class is written on a stored trial: "quality run failed: <why>".
_FAILED_PREFIX = "quality run failed: "


@dataclass(frozen=True, kw_only=True)
class QualityVerdict:
    status: QualityStatus             # (its value is accepted too, and turned into one)
    math_class: str | None = None     # None: a script's own accuracy, judged per trial
    sample: Sample | None = None      # the class's seeded qualities behind the verdict
    gate: GateResult | None = None    # the Welch test, when the class was gated
    why: str = ""                     # one line: a failure's cause, a confirmation's evidence

    def __post_init__(self) -> None:
        if self.status not in _STATUSES:
            raise ValueError(f"status={self.status!r}: choose one of accepted, rejected, "
                             "pending, failed")
        object.__setattr__(self, "status", QualityStatus(self.status))

    @property
    def accepted(self) -> bool:
        return self.status == QualityStatus.ACCEPTED

    @property
    def mean(self) -> float | None:
        """The class's mean seeded quality (None when not measured)."""
        return self.sample.mean if self.sample is not None else None

    @property
    def violation(self) -> float:
        """The constraint the sampler sees: > 0 exactly when the class may not win (rejected by
        how far it is beyond tolerance plus noise, failed by 1), <= 0 otherwise."""
        if self.status == QualityStatus.FAILED:
            return 1.0
        if self.gate is None:
            return 0.0
        margin = self.gate.margin_pp
        return margin if self.gate.reject else min(0.0, margin)

    @property
    def label(self) -> str:
        """The one word (or a failure's line) a stored trial and the report show."""
        failed = self.status == QualityStatus.FAILED and self.why
        return _FAILED_PREFIX + self.why if failed else self.status.value

    def trial_fields(self) -> dict[str, Any]:
        """The TrialResult fields that store this verdict on a trial."""
        out: dict[str, Any] = {"quality": self.label}
        if self.math_class is not None:
            out["math_class"] = self.math_class
        if self.sample is not None:
            out.update(quality_sd=self.sample.sd, quality_n=self.sample.n)
        if self.gate is not None:
            out["quality_verdict"] = self.gate.describe()
        return out


def judge_single_run(floor: Sample, accuracy: float, tolerance_pp: float) -> QualityVerdict:
    """A script's one reported accuracy against the default launch's seeds (gate.single_run_gate)."""
    gated = single_run_gate(floor, accuracy, tolerance_pp)
    return QualityVerdict(status=gate_status(gated), gate=gated)


def gate_status(gated: GateResult) -> QualityStatus:
    """What a gate's answer makes of a class: rejected or accepted."""
    return QualityStatus.REJECTED if gated.reject else QualityStatus.ACCEPTED


def stored_verdict(result: TrialResult) -> QualityVerdict:
    """The verdict a trial was stored with (pending when it has none, or one not known here)."""
    text = result.quality or QualityStatus.PENDING
    if text.startswith(_FAILED_PREFIX):
        return QualityVerdict(status=QualityStatus.FAILED, math_class=result.math_class,
                              why=text[len(_FAILED_PREFIX):])
    status = text if text in _STATUSES else QualityStatus.PENDING
    return QualityVerdict(status=status, math_class=result.math_class)


def accuracy_violation(acc: float | None, base: float | None, max_drop_pp: float) -> float:
    """Without a noise floor (a script's single numbers): > 0 when the accuracy fell more than
    the allowed percentage points below the default launch's."""
    if acc is None or base is None:
        return 1.0 if acc is None else 0.0
    return (base - acc) * 100.0 - max_drop_pp
