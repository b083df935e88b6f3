"""The quality side of `autotune report`: the noise floor, and for each configuration its
quality with the noise, the time to reach the default launch's quality, and goodput.

Pure apart from reading the study's user attributes (written by evidence.QualityBook).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..measure import quality as Q
from ..config import REFERENCE_GLOBAL_BATCH
from ..run.outcome import TrialResult
from .evidence import NOISE_FLOOR_ATTR, ClassEvidence, stored_classes


@dataclass(frozen=True, kw_only=True)
class QualityFacts:
    mean: float | None
    sd: float | None
    n: int
    verdict: str                    # accepted | rejected | pending | failed | ...
    samples_to_target: int | None
    time_to_target_s: float | None  # training time to the target at this throughput
    goodput: float | None           # samples/s x statistical efficiency (Pollux)
    efficiency: float | None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def verdict(study_attrs: dict[str, Any], result: TrialResult) -> str:
    """The gate's answer for a trial's class with everything stored now (a class measured after
    the trial was recorded included): accepted, rejected, pending or failed."""
    cls = result.math_class
    floor = study_attrs.get(NOISE_FLOOR_ATTR) or {}
    ev = stored_classes(study_attrs).get(cls) if cls else None
    if ev is None or not floor.get("values"):
        return result.quality or "pending"
    if ev.failed and ev.sample() is None:
        return "failed"
    if cls == floor.get("math_class"):
        return "accepted"
    seeds = tuple(range(int(floor["n"])))
    sample = ev.sample(seeds)
    if sample is None:
        return "pending"
    tol = float((study_attrs.get("settings") or {}).get("max_accuracy_drop", 1.0))
    v = Q.gate(Q.Sample(tuple(floor["values"])), sample, tol)
    return "rejected" if v.reject else "accepted"


def facts(study_attrs: dict[str, Any], result: TrialResult, throughput: float,
          global_batch: int) -> QualityFacts | None:
    classes = stored_classes(study_attrs)
    cls = result.math_class
    if cls is None:
        return None
    ev: ClassEvidence | None = classes.get(cls)
    floor = study_attrs.get(NOISE_FLOOR_ATTR) or {}
    tol = float((study_attrs.get("settings") or {}).get("max_accuracy_drop", 1.0))
    sample = ev.sample() if ev else None
    target = floor["mean"] - tol / 100.0 if floor.get("mean") is not None else None
    to_target = Q.samples_to_target(ev.curves(), target) if ev and target is not None else None
    b_noise = floor.get("b_noise")
    reference = int((study_attrs.get("settings") or {}).get("reference_batch",
                                                             REFERENCE_GLOBAL_BATCH))
    eff = Q.efficiency(b_noise, global_batch, reference) if b_noise or \
        global_batch == reference else None
    return QualityFacts(
        mean=sample.mean if sample else None, sd=sample.sd if sample else None,
        n=sample.n if sample else 0, verdict=verdict(study_attrs, result),
        samples_to_target=to_target,
        time_to_target_s=to_target / throughput if to_target and throughput else None,
        goodput=throughput * eff if eff is not None else None, efficiency=eff)


def noise_floor_line(study_attrs: dict[str, Any]) -> str:
    floor = study_attrs.get(NOISE_FLOOR_ATTR)
    if not floor:
        return "noise floor: not measured (no seeded quality runs of the default launch)"
    tol = float((study_attrs.get("settings") or {}).get("max_accuracy_drop", 1.0))
    b = floor.get("b_noise")
    gns = f"; gradient noise scale B_noise ~ {b:.0f} samples" if b else ""
    return (f"noise floor: default launch quality {floor['mean']:.4f} ± {floor['sd']:.4f} over "
            f"{floor['n']} seeds; a configuration is rejected only when it loses more than "
            f"{tol:g} pp plus the noise (one-sided Welch t-test, 5%){gns}")


def table(rows: list[tuple[int, float, float | None, QualityFacts | None, str]]) -> list[str]:
    """rows: (trial, samples/s, x default, facts, knobs) -> text lines."""
    lines = [f"  {'trial':>5}  {'samples/s':>10}  {'x def':>6}  {'quality ± sd (n)':>20}  "
             f"{'verdict':>8}  {'to target':>9}  {'goodput':>8}  knobs"]
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
        lines.append(f"  {number:>5}  {thr:>10.1f}  {xs:>6}  {q:>20}  {verdict:>8}  {ttt:>9}  "
                     f"{gp:>8}  {knobs}")
    return lines
