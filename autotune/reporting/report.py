"""What a study found, as a value: top configurations, the throughput/accuracy Pareto front, which
knobs mattered and why trials failed (`autotune report`).

Pure apart from reading the study: `build_report(study)` returns a `Report` whose `text()` is for
people and `to_json()` for scripts. Nothing here writes to the storage.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import TrialState

from ..clean import one_line
from . import quality as QR
from ..quality.evidence import stored_classes
from ..quality.script_floor import stored_script_floor
from ..quality.verdict import FAILED, REJECTED
from ..study.attrs import StudyAttrs
from .. import result as R
from ..config import changed_knobs
from .format import _clip, _knobs, _machine, _num, _table
from ..measure.contention import DISTURBED_SHARE, disturbed
from ..measure.stats import BUSY_CPU_SHARE, busy
from ..study.records import (DEFAULT_ROLE, REPEAT_ROLE, RUN_CPU_ROLE, RUN_CPU_WON,
                             RUN_CPU_WORDS, SEARCH_ROLE, Record, has_record, record_of,
                             recommends_run_cpu)

MIN_IMPORTANCE_TRIALS = 5


@dataclass(frozen=True, kw_only=True)
class Row:
    number: int
    role: str
    throughput: float
    x_default: float | None
    accuracy: float | None
    feasible: bool                   # within the accuracy tolerance (and every other constraint)
    changes: dict[str, Any]          # knobs that differ from the default launch
    cpu_share: float | None = None   # of rank 0's threads' CPU time it got; None = not recorded
    outside_share: float | None = None  # of its cores taken by other processes (contention.py)

    @property
    def disturbed(self) -> bool:
        return disturbed(self.outside_share)

    @property
    def busy(self) -> bool:
        """Disturbed; for a trial stored before contention was measured, a low cpu_share."""
        return self.disturbed if self.outside_share is not None else busy(self.cpu_share)

    def to_json(self) -> dict[str, Any]:
        return {"trial": self.number, "role": self.role, "throughput": self.throughput,
                "x_default": self.x_default, "accuracy": self.accuracy,
                "feasible": self.feasible, "changes": self.changes,
                "cpu_share": self.cpu_share, "outside_share": self.outside_share,
                "busy": self.busy}


@dataclass(frozen=True, kw_only=True)
class Failure:
    outcome: str
    count: int
    example: str
    trial: int | None


@dataclass(frozen=True, kw_only=True)
class Report:
    study: str
    machine: str
    fingerprint: str | None
    workload: str
    counts: dict[str, int]                       # outcome -> trials (repeats not counted)
    recommendation: dict[str, Any] | None
    references: dict[str, float | None]          # role -> throughput
    top: tuple[Row, ...]
    pareto: tuple[Row, ...]
    importances: dict[str, float] | None
    importance_note: str
    failures: tuple[Failure, ...]
    outside_tolerance: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    # A script's score is not samples/s: 1/time with --lower-is-better, 1/wall time without a
    # metric. The unit says so and `script_notes` say what the scores are and what it overrode.
    unit: str = "samples/s"
    script_notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"study": self.study, "machine": self.machine, "fingerprint": self.fingerprint,
                "workload": self.workload, "trials_by_outcome": self.counts,
                "outside_accuracy_tolerance": self.outside_tolerance,
                "recommendation": self.recommendation, "references": self.references,
                "top": [r.to_json() for r in self.top],
                "pareto": [r.to_json() for r in self.pareto],
                "importances": self.importances, "importance_note": self.importance_note,
                "failures": [{"outcome": f.outcome, "count": f.count, "example": f.example,
                              "trial": f.trial} for f in self.failures],
                "unit": self.unit, "script_notes": list(self.script_notes), **self.extra}

    def text(self) -> str:
        total = sum(self.counts.values())
        by = ", ".join(f"{n} {o}" for o, n in sorted(self.counts.items(), key=lambda kv: -kv[1]))
        out = [f"study {self.study}",
               f"machine: {self.machine}" + (f" (topology {self.fingerprint})" if self.fingerprint else ""),
               f"workload: {self.workload}",
               f"trials: {total} ({by or 'none'})" + (
                   f"; {self.outside_tolerance} ran but fell outside the accuracy tolerance"
                   if self.outside_tolerance else "")]
        rec = self.recommendation
        if rec:
            out.append("")
            out.append(rec.get("headline") or "recommendation stored")
            settling = (rec.get("settling") or {}).get("text")
            # a settled speedup's headline already holds its interval: one interval, not two
            if settling and settling.split("(", 1)[-1].rstrip(")") not in rec.get("headline", ""):
                out.append(f"  verification: {settling}")
            if rec.get("vs_run_cpu"):
                out.append(f"  {rec['vs_run_cpu']:.2f}x over {RUN_CPU_WORDS}")
            if recommends_run_cpu(rec):
                out.append(f"  {RUN_CPU_WON}")
            changes = changed_knobs(rec.get("config", {}))
            out.append(f"  config: {_knobs(changes)}")
        else:
            out += ["", "no recommendation stored (the search was interrupted, or has not "
                    "finished verifying)"]
        refs = [f"{role.split(':')[1]} {_num(t)} {self.unit}" for role, t in self.references.items()]
        out.append("references: " + (", ".join(refs) if refs else "none measured"))
        out += [f"  {note}" for note in self.script_notes]
        out += ["", f"top {len(self.top)} configurations (measured once each during the search):"]
        out += _table(self.top, self.unit) if self.top else ["  none completed"]
        busy_rows = sum(r.busy for r in self.top)
        if busy_rows:
            out.append(f"  [busy]: {busy_rows} measured while the machine was busy (other "
                       f"processes took over {DISTURBED_SHARE:.0%} of the trial cores or, in "
                       f"older trials, rank 0 got less than {BUSY_CPU_SHARE:.0%} of its threads' "
                       "CPU time); such a figure is never recommended alone: verification "
                       "re-measures it")
        quality = self.extra.get("quality")
        if quality is not None:
            goal = self.extra.get("target") or {}
            out += ["", "quality (seeded runs per math class; time to reach a common target; "
                    "goodput = samples/s x statistical efficiency):",
                    f"  {self.extra.get('noise_floor', '')}", f"  {goal.get('why', '')}"]
            out += QR.table([(q["trial"], q["throughput"], q["x_default"],
                              QR.QualityFacts(**q["facts"]) if q["facts"] else None, q["knobs"])
                             for q in quality], with_target=goal.get("value") is not None)
        out += ["", "throughput/accuracy Pareto front (feasible trials, none better in both):"]
        out += _table(self.pareto, self.unit) if self.pareto else ["  no feasible trial"]
        out += ["", "which knobs mattered for throughput (PED-ANOVA over feasible search trials):"]
        if self.importances:
            width = max(len(k) for k in self.importances)
            top = max(self.importances.values()) or 1.0
            for knob, value in self.importances.items():
                bar = "#" * round(20 * value / top)
                out.append(f"  {knob:<{width}}  {value:6.3f}  {bar}")
            if self.importance_note:
                out.append(f"  ({self.importance_note})")
        else:
            out.append(f"  {self.importance_note}")
        out += ["", "failures by reason:"]
        if self.failures:
            for f in self.failures:
                where = f" (trial {f.trial})" if f.trial is not None else ""
                out.append(f"  {f.outcome}: {f.count}, e.g.{where} {_clip(f.example)}")
        else:
            out.append("  none")
        # each entry is one line; a newline inside a stored headline or reason must not add one
        return "\n".join(one_line(line) for line in out)


def build_report(study: optuna.Study, *, top: int = 10) -> Report:
    attrs = StudyAttrs.of(study)
    trials = study.get_trials(deepcopy=False)
    recs = [record_of(t) for t in trials if t.state == TrialState.COMPLETE and has_record(t)]
    fresh = [r for r in recs if r.role != REPEAT_ROLE]
    failed = [record_of(t) for t in trials if t.state == TrialState.FAIL and has_record(t)]
    counts = Counter(r.outcome for r in fresh + failed)
    running = sum(t.state == TrialState.RUNNING for t in trials)
    if running:
        counts["running"] += running

    refs = {role: next((r.throughput for r in fresh if r.role == role), None)
            for role in (DEFAULT_ROLE, RUN_CPU_ROLE)
            if any(r.role == role for r in fresh)}
    default_thr = refs.get(DEFAULT_ROLE)
    rows = _rows(fresh, default_thr, attrs)
    importances, note = importance(study)
    return Report(study=study.study_name, machine=_machine(attrs.topology_json),
                  fingerprint=attrs.fingerprint, workload=str(attrs.workload or "?"),
                  counts=dict(counts), recommendation=attrs.recommendation,
                  references=refs, top=tuple(rows[:max(0, top)]),
                  pareto=tuple(pareto_front([r for r in rows if r.feasible])),
                  importances=importances, importance_note=note,
                  failures=tuple(failures(fresh + failed)),
                  outside_tolerance=sum(1 for r in fresh if r.outcome == R.OK and not r.feasible),
                  extra=_quality_extra(attrs, fresh, rows[:max(0, top)]),
                  **_script_facts(attrs))


def _quality_extra(attrs: StudyAttrs, recs: list[Record], rows: list[Row]) -> dict[str, Any]:
    if not attrs.quality_evidence:
        return {}
    by_number = {r.number: r for r in recs}
    goal = QR.target(attrs)
    out = []
    for row in rows:
        r = by_number[row.number]
        f = QR.facts(attrs, r.result, row.throughput, r.config.global_batch, goal)
        out.append({"trial": row.number, "throughput": row.throughput, "x_default": row.x_default,
                    "facts": f.to_json() if f else None, "knobs": _knobs(row.changes)})
    return {"quality": out, "noise_floor": QR.noise_floor_line(attrs),
            "target": {"value": goal.value, "why": goal.why}}


def _script_facts(attrs: StudyAttrs | dict[str, Any]) -> dict[str, Any]:
    """Unit and notes of a script study (nothing for a built-in workload)."""
    attrs = StudyAttrs(attrs)
    if not attrs.script_command:
        return {}
    metric = attrs.script_metric
    if metric and attrs.script_lower_is_better:
        what = f"score = 1 / the median of --metric {metric!r} (lower is better)"
    elif metric:
        what = f"score = the median of --metric {metric!r}"
    else:
        what = "score = 1 / wall seconds per run (or autotune.report_metrics()), start-up included"
    notes = [what] + [f"not tuned, the script sets its own {k}: {why}"
                      for k, why in attrs.script_overrides.items()]
    floor = _script_floor_line(attrs)
    return {"unit": "score", "script_notes": tuple(notes + ([floor] if floor else []))}


def _script_floor_line(attrs: StudyAttrs) -> str:
    """The script's --accuracy noise floor over seeds, or why the gate has none."""
    floor = attrs.script_noise_floor
    s = stored_script_floor(attrs)
    if s is not None:
        seeds = ", ".join(str(x) for x in floor.get("seeds") or [])
        return (f"accuracy noise floor: the default launch measured {s.describe()} over seeds "
                f"{seeds}; the gate allows --max-accuracy-drop plus this noise")
    return floor.get("note") or ""


def _rows(recs: list[Record], default_thr: float | None, attrs: StudyAttrs) -> list[Row]:
    """Measured configurations, fastest first, each configuration once."""
    seen, rows = set(), []
    for r in sorted((r for r in recs if r.outcome == R.OK and r.throughput),
                    key=lambda r: r.throughput, reverse=True):
        if r.config.key() in seen:
            continue
        seen.add(r.config.key())
        feasible = r.feasible and QR.verdict(attrs, r.result).status not in (REJECTED, FAILED)
        rows.append(Row(number=r.number, role=r.role, throughput=r.throughput,
                        x_default=r.throughput / default_thr if default_thr else None,
                        accuracy=accuracy_of(r, attrs), feasible=feasible,
                        changes=changed_knobs(r.config),
                        cpu_share=r.result.cpu_share, outside_share=r.result.outside_share))
    return rows


def accuracy_of(r: Record, attrs: StudyAttrs | dict[str, Any]) -> float | None:
    """Quality is measured once per math class and stored on the study (a class measured after
    this trial was recorded still counts); the trial's second objective cannot tell "not
    measured" (stored as 0.0) from a real 0.0."""
    ev = stored_classes(attrs).get(r.result.math_class or "")
    sample = ev.sample() if ev else None
    return sample.mean if sample else r.accuracy


def pareto_front(rows: list[Row]) -> list[Row]:
    """Rows no other row beats in both throughput and accuracy (unknown accuracy ranks lowest)."""
    def acc(r: Row) -> float:
        return r.accuracy if r.accuracy is not None else float("-inf")

    front = [r for r in rows
             if not any(o.throughput >= r.throughput and acc(o) >= acc(r)
                        and (o.throughput > r.throughput or acc(o) > acc(r)) for o in rows)]
    return sorted(front, key=lambda r: r.throughput, reverse=True)


def importance(study: optuna.Study) -> tuple[dict[str, float] | None, str]:
    """PED-ANOVA importances of the knobs for high throughput, over feasible sampler-proposed
    trials: how differently each knob is distributed in the fastest 10% than in all of them.

    References and repeats are left out: references carry no sampler params, and a repeat would
    count one measurement twice. The trials are copied into an in-memory study so the evaluator
    sees exactly that subset.
    """
    from optuna.importance import PedAnovaImportanceEvaluator, get_param_importances
    chosen = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
              if t.params and t.values and has_record(t)
              and (r := record_of(t)).role == SEARCH_ROLE and r.feasible]
    if len(chosen) < MIN_IMPORTANCE_TRIALS:
        return None, (f"not enough data: {len(chosen)} feasible search trial(s), at least "
                      f"{MIN_IMPORTANCE_TRIALS} needed; run a longer search")
    varied, fixed = varied_knobs(chosen)
    if not varied:
        return None, "every feasible search trial used the same knob values"
    # A single-objective "maximize" copy rather than `target=lambda t: t.values[0]`: with a
    # target, PED-ANOVA ranks knobs by how they reach *low* values, the wrong end for throughput.
    # Only the knobs that varied: one that held one value cannot have mattered, and listing it
    # at 0.000 reads as "measured, no effect".
    sub = optuna.create_study(direction="maximize")
    for t in chosen:
        sub.add_trial(optuna.trial.create_trial(
            params={k: t.params[k] for k in varied},
            distributions={k: t.distributions[k] for k in varied}, value=t.values[0]))
    try:
        result = get_param_importances(sub, evaluator=PedAnovaImportanceEvaluator())
    except (ValueError, RuntimeError, ZeroDivisionError) as exc:
        return None, f"importances could not be computed from {len(chosen)} trials: {exc}"
    note = f"not ranked, one value in every trial: {', '.join(fixed)}" if fixed else ""
    return {k: float(v) for k, v in result.items()}, note


def varied_knobs(trials: list) -> tuple[list[str], list[str]]:
    """(knobs that took more than one value, knobs that held one) over trials' params. A knob
    some trials lack (a conditional one) is left out of both: the evaluator needs it in all."""
    common = set.intersection(*(set(t.params) for t in trials)) if trials else set()
    names = [k for k in trials[0].params if k in common] if trials else []
    varied = [k for k in names if len({repr(t.params[k]) for t in trials}) > 1]
    return varied, [k for k in names if k not in varied]


def failures(recs: list[Record]) -> list[Failure]:
    groups: dict[str, list[tuple[int | None, str]]] = {}
    for r in recs:
        if r.outcome != R.OK:
            groups.setdefault(r.outcome, []).append((r.number, r.reason))
    out = []
    for outcome, items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        number, reason = next(((n, why) for n, why in items if why), items[0])
        out.append(Failure(outcome=outcome, count=len(items), example=reason or "(no reason stored)",
                           trial=number))
    return out


