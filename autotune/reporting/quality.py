"""The quality side of `autotune report`: the noise floor, and for each configuration its
quality with the noise, the time to reach a common quality target, and goodput.

The target is the default launch's quality (its mean over every seed at the study's length) less
the tolerance. A class shown within the tolerance reaches it on its paired seeds by construction
(the older rule accepted classes that did not, and lowered the target to them). With no learning curves at all (a script reports one final number) the
column is dropped with its reason.

Pure apart from reading the study's user attributes (written by evidence.QualityBook).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import REFERENCE_GLOBAL_BATCH
from ..result import TrialResult
from ..study.attrs import StudyAttrs
from ..study.records import Record
from ..quality.evidence import ClassEvidence, stored_classes
from ..quality.looks import judge
from ..quality.goodput import efficiency, samples_to_target
from ..quality.verdict import QualityStatus, QualityVerdict, status_of, stored_verdict
from .format import _knobs
from .rows import Row


@dataclass(frozen=True, kw_only=True)
class QualityFacts:
    mean: float | None
    sd: float | None
    n: int
    verdict: str                    # QualityVerdict.label: accepted | rejected | pending | ...
    samples_to_target: int | None
    time_to_target_s: float | None  # training time to the target at this throughput
    goodput: float | None           # samples/s x statistical efficiency (Pollux)
    efficiency: float | None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True, kw_only=True)
class Target:
    value: float | None    # the quality time-to-target is measured to; None: no such column
    why: str               # one line: how it was chosen, or why the column is dropped


def verdict(study_attrs: StudyAttrs | dict[str, Any], result: TrialResult) -> QualityVerdict:
    """The gate's answer for a trial's class with everything stored now (a class measured after
    the trial was recorded included), else the one the trial was stored with."""
    cls = result.math_class
    return (class_verdict(study_attrs, cls) if cls else None) or stored_verdict(result)


def class_verdict(study_attrs: StudyAttrs | dict[str, Any], cls: str) -> QualityVerdict | None:
    """The verdict for a stored class, judged on the runs stored now by the one rule every reader
    uses (quality/looks.judge: a study of the older rule is judged again here, from its figures;
    nothing stored changes); None when the class or the default's runs are not stored."""
    attrs = StudyAttrs(study_attrs)
    floor = attrs.noise_floor or {}
    classes = stored_classes(study_attrs)
    ev, base = classes.get(cls), classes.get(floor.get("math_class", ""))
    if ev is None or base is None or not floor.get("values"):
        return None
    if cls == floor.get("math_class"):
        return QualityVerdict(status=QualityStatus.WITHIN, math_class=cls, sample=ev.sample(),
                              why="same math as the default launch")
    bound = judge(base, ev, float(attrs.settings.get("max_accuracy_drop", 1.0)))
    if bound is None:
        return QualityVerdict(status=QualityStatus.PENDING, math_class=cls)
    if ev.failed and not bound.n:
        return QualityVerdict(status=QualityStatus.FAILED, math_class=cls, gate=bound,
                              why=ev.failed)
    return QualityVerdict(status=status_of(bound), math_class=cls, sample=ev.sample(bound.seeds),
                          gate=bound)


def curve_end(curves: list[list[tuple[int, float]]]) -> float | None:
    """The last point of the seeds' mean learning curve (as samples_to_target averages it)."""
    if not curves or min(len(c) for c in curves) == 0:
        return None
    n = min(len(c) for c in curves)
    return sum(c[n - 1][1] for c in curves) / len(curves)


def target(study_attrs: StudyAttrs | dict[str, Any]) -> Target:
    """The time-to-accuracy target of a study, or why there is none (see the module doc)."""
    floor = StudyAttrs(study_attrs).noise_floor or {}
    if floor.get("mean") is None:
        return Target(value=None, why="time to target: not shown, the default launch's quality "
                                      "was not measured")
    classes = stored_classes(study_attrs)
    base = classes.get(floor.get("math_class", ""))
    if base is None or curve_end(base.curves()) is None:
        return Target(value=None, why="time to target: not shown, the quality runs stored no "
                                      "learning curve (a script reports only its final accuracy)")
    tol = float(StudyAttrs(study_attrs).settings.get("max_accuracy_drop", 1.0))
    mean = base.sample().mean if base.sample() else floor["mean"]
    wanted = mean - tol / 100.0
    return Target(value=wanted, why=f"time to target {wanted:.4f}: the default launch's quality "
                                    f"{mean:.4f} less {tol:g} pp")


def facts(study_attrs: StudyAttrs | dict[str, Any], result: TrialResult, throughput: float,
          global_batch: int, goal: Target | None = None) -> QualityFacts | None:
    """`goal`: the study's target (computed once for a table; `target(study_attrs)` if None)."""
    classes = stored_classes(study_attrs)
    cls = result.math_class
    if cls is None:
        return None
    ev: ClassEvidence | None = classes.get(cls)
    floor = StudyAttrs(study_attrs).noise_floor or {}
    sample = ev.sample() if ev else None
    goal = goal or target(study_attrs)
    to_target = samples_to_target(ev.curves(), goal.value) \
        if ev and goal.value is not None else None
    b_noise = floor.get("b_noise")
    reference = int(StudyAttrs(study_attrs).settings.get("reference_batch",
                                                             REFERENCE_GLOBAL_BATCH))
    eff = efficiency(b_noise, global_batch, reference) if b_noise or \
        global_batch == reference else None
    return QualityFacts(
        mean=sample.mean if sample else None, sd=sample.sd if sample else None,
        n=sample.n if sample else 0, verdict=verdict(study_attrs, result).label,
        samples_to_target=to_target,
        time_to_target_s=to_target / throughput if to_target and throughput else None,
        goodput=throughput * eff if eff is not None else None, efficiency=eff)


def noise_floor_line(study_attrs: StudyAttrs | dict[str, Any]) -> str:
    floor = StudyAttrs(study_attrs).noise_floor
    if not floor:
        return "noise floor: not measured (no seeded quality runs of the default launch)"
    tol = float(StudyAttrs(study_attrs).settings.get("max_accuracy_drop", 1.0))
    b = floor.get("b_noise")
    gns = f"; gradient noise scale B_noise ~ {b:.0f} samples" if b else ""
    return (f"noise floor: default launch quality {floor['mean']:.4f} ± {floor['sd']:.4f} over "
            f"{floor['n']} seeds; a class that changes the math is accepted only when the 95% "
            f"upper bound of its drop, paired seed by seed with these runs, is within {tol:g} pp "
            f"(one-sided paired t-test); otherwise it is 'not shown' or 'beyond'{gns}")


def table(rows: list[tuple[int, float, float | None, QualityFacts | None, str]],
          with_target: bool = True) -> list[str]:
    """rows: (trial, samples/s, x default, facts, knobs) -> text lines; `with_target`: False
    drops the time-to-target column (the study has no target; its reason is said above)."""
    lines = [f"  {'trial':>5}  {'samples/s':>10}  {'x def':>6}  {'quality ± sd (n)':>20}  "
             f"{'verdict':>8}  " + (f"{'to target':>9}  " if with_target else "") +
             f"{'goodput':>8}  knobs"]
    for number, thr, x, f, knobs in rows:
        if f is None:
            q, verdict, ttt, gp = "-", "-", "-", "-"
        else:
            q = f"{f.mean:.4f} ± {f.sd:.4f} ({f.n})" if f.mean is not None else "-"
            verdict = f.verdict
            ttt = f"{f.time_to_target_s:.1f}s" if f.time_to_target_s else "not reached" \
                if f.mean is not None else "-"
            gp = f"{f.goodput:.1f}" if f.goodput is not None else "-"
        xs = f"{x:.2f}x" if x else "-"
        lines.append(f"  {number:>5}  {thr:>10.1f}  {xs:>6}  {q:>20}  {verdict:>8}  " +
                     (f"{ttt:>9}  " if with_target else "") + f"{gp:>8}  {knobs}")
    return lines


def quality_extra(attrs: StudyAttrs, recs: list[Record], rows: list[Row]) -> dict[str, Any]:
    """The quality side of the top rows, for Report.extra (nothing without seeded evidence)."""
    if not attrs.quality_evidence:
        return {}
    by_number = {r.number: r for r in recs}
    goal = target(attrs)
    out = []
    for row in rows:
        r = by_number[row.number]
        f = facts(attrs, r.result, row.throughput, r.config.global_batch, goal)
        out.append({"trial": row.number, "throughput": row.throughput, "x_default": row.x_default,
                    "facts": f.to_json() if f else None, "knobs": _knobs(row.changes)})
    return {"quality": out, "noise_floor": noise_floor_line(attrs),
            "target": {"value": goal.value, "why": goal.why}}
