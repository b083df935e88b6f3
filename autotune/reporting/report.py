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

from ..result import Outcome
from ..util.clean import one_line
from ..config import Config, changed_knobs
from ..search.account import describe as describe_account
from ..measure.contention import DISTURBED_SHARE
from ..measure.stats import BUSY_CPU_SHARE
from ..quality.verdict import QualityStatus
from ..recommend.words import recommendation_lines
from ..study.attrs import StudyAttrs
from ..study.records import READ_STATES, Record, Role, has_record, record_of
from . import quality as QR
from .format import _clip, _knobs, _machine, _num, _table
from ..quality.evidence import stored_classes
from .diagnosis import diagnosis_lines
from .importance import importance
from .rows import Failure, Row, pareto_front
from .script import script_facts


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
        out = self._summary_lines() + self._recommendation_lines() + self._time_lines()
        out += self._top_lines()
        out += self._quality_lines()
        out += ["", "throughput/accuracy Pareto front (feasible trials, none better in both):"]
        out += _table(self.pareto, self.unit) if self.pareto else ["  no feasible trial"]
        out += self._importance_lines() + self._failure_lines()
        # each entry is one line; a newline inside a stored headline or reason must not add one
        return "\n".join(one_line(line) for line in out)

    def _summary_lines(self) -> list[str]:
        total = sum(self.counts.values())
        by = ", ".join(f"{n} {o}" for o, n in sorted(self.counts.items(), key=lambda kv: -kv[1]))
        return [f"study {self.study}",
                f"machine: {self.machine}" + (f" (topology {self.fingerprint})" if self.fingerprint else ""),
                f"workload: {self.workload}",
                f"trials: {total} ({by or 'none'})" + (
                    f"; {self.outside_tolerance} ran but fell outside the accuracy tolerance"
                    if self.outside_tolerance else "")]

    def _recommendation_lines(self) -> list[str]:
        rec = self.recommendation
        if not rec:
            out = ["", "no recommendation stored (the search was interrupted, or has not "
                   "finished verifying)"]
        else:
            out = ["", *recommendation_lines(rec),
                   f"  config: {_knobs(changed_knobs(rec.get('config', {})))}"]
        refs = [f"{role.split(':')[1]} {_num(t)} {self.unit}" for role, t in self.references.items()]
        out.append("references: " + (", ".join(refs) if refs else "none measured"))
        return out + [f"  {note}" for note in self.script_notes]

    def _time_lines(self) -> list[str]:
        """Where the steps' time goes, and where the last search's budget went."""
        out = [f"  {line}" for line in self.extra.get("where_the_time_goes") or ()]
        if self.extra.get("budget"):
            out += [f"  {line}" for line in describe_account(self.extra["budget"])]
        return out

    def _top_lines(self) -> list[str]:
        out = ["", f"top {len(self.top)} configurations (measured once each during the search):"]
        out += _table(self.top, self.unit) if self.top else ["  none completed"]
        busy_rows = sum(r.busy for r in self.top)
        if busy_rows:
            out.append(f"  [busy]: {busy_rows} measured while the machine was busy (other "
                       f"processes took over {DISTURBED_SHARE:.0%} of the trial cores or, in "
                       f"older trials, rank 0 got less than {BUSY_CPU_SHARE:.0%} of its threads' "
                       "CPU time); such a figure is never recommended alone: verification "
                       "re-measures it")
        return out

    def _quality_lines(self) -> list[str]:
        quality = self.extra.get("quality")
        if quality is None:
            return []
        goal = self.extra.get("target") or {}
        out = ["", "quality (seeded runs per math class; time to reach a common target; "
               "goodput = samples/s x statistical efficiency):",
               f"  {self.extra.get('noise_floor', '')}", f"  {goal.get('why', '')}"]
        return out + QR.table([(q["trial"], q["throughput"], q["x_default"],
                                QR.QualityFacts(**q["facts"]) if q["facts"] else None, q["knobs"])
                               for q in quality], with_target=goal.get("value") is not None)

    def _importance_lines(self) -> list[str]:
        out = ["", "which knobs mattered for throughput (PED-ANOVA over feasible search trials):"]
        if not self.importances:
            return out + [f"  {self.importance_note}"]
        width = max(len(k) for k in self.importances)
        top = max(self.importances.values()) or 1.0
        for knob, value in self.importances.items():
            bar = "#" * round(20 * value / top)
            out.append(f"  {knob:<{width}}  {value:6.3f}  {bar}")
        if self.importance_note:
            out.append(f"  ({self.importance_note})")
        return out

    def _failure_lines(self) -> list[str]:
        out = ["", "failures by reason:"]
        for f in self.failures:
            where = f" (trial {f.trial})" if f.trial is not None else ""
            out.append(f"  {f.outcome}: {f.count}, e.g.{where} {_clip(f.example)}")
        return out if self.failures else out + ["  none"]


def build_report(study: optuna.Study, *, top: int = 10) -> Report:
    attrs = StudyAttrs.of(study)
    trials = study.get_trials(deepcopy=False)
    recs = [record_of(t) for t in trials if t.state in READ_STATES and has_record(t)]
    fresh = [r for r in recs if r.role != Role.REPEAT]
    failed = [record_of(t) for t in trials if t.state == TrialState.FAIL and has_record(t)]
    counts = Counter(r.outcome for r in fresh + failed)
    running = sum(t.state == TrialState.RUNNING for t in trials)
    if running:
        counts["running"] += running

    refs = {role: next((r.throughput for r in fresh if r.role == role), None)
            for role in (Role.DEFAULT, Role.RUN_CPU, Role.DEFAULT_COMPILED)
            if any(r.role == role for r in fresh)}
    default_thr = refs.get(Role.DEFAULT)
    rows = _rows(fresh, default_thr, attrs)
    importances, note = importance(study)
    return Report(study=study.study_name, machine=_machine(attrs.topology_json),
                  fingerprint=attrs.fingerprint, workload=str(attrs.workload or "?"),
                  counts=dict(counts), recommendation=attrs.recommendation,
                  references=refs, top=tuple(rows[:max(0, top)]),
                  pareto=tuple(pareto_front([r for r in rows if r.feasible])),
                  importances=importances, importance_note=note,
                  failures=tuple(failures(fresh + failed)),
                  outside_tolerance=sum(1 for r in fresh
                                        if r.outcome == Outcome.OK and not r.feasible),
                  extra={**QR.quality_extra(attrs, fresh, rows[:max(0, top)]),
                         **_time_extra(attrs, fresh)},
                  **script_facts(attrs))


def _rows(recs: list[Record], default_thr: float | None, attrs: StudyAttrs) -> list[Row]:
    """Measured configurations, fastest first, each configuration once."""
    seen, rows = set(), []
    for r in sorted((r for r in recs if r.outcome == Outcome.OK and r.throughput),
                    key=lambda r: r.throughput, reverse=True):
        if r.config.key() in seen:
            continue
        seen.add(r.config.key())
        tolerance = tolerance_of(r, QR.verdict(attrs, r.result))
        rows.append(Row(number=r.number, role=r.role, throughput=r.throughput,
                        x_default=r.throughput / default_thr if default_thr else None,
                        accuracy=accuracy_of(r, attrs), feasible=tolerance == "ok",
                        tolerance=tolerance,
                        changes=changed_knobs(r.config),
                        cpu_share=r.result.cpu_share, outside_share=r.result.outside_share,
                        split=r.result.split, of_ceiling=r.result.of_ceiling))
    return rows


def tolerance_of(r: Record, verdict) -> str:
    """The row's "tol" word: what its accuracy verdict showed (Row.tolerance)."""
    if not r.feasible or verdict.status in (QualityStatus.BEYOND, QualityStatus.FAILED):
        return "no"
    judged = r.result.quality is not None or r.result.math_class is not None
    return "?" if judged and not verdict.accepted else "ok"


def _time_extra(attrs: StudyAttrs, fresh: list[Record]) -> dict[str, Any]:
    """The report's `where_the_time_goes` lines and the stored `budget` account."""
    classes = {r.config.key(): r.result.math_class or r.config.key() for r in fresh}
    rec = attrs.recommendation
    recommended = Config.from_dict(rec["config"]) if rec and rec.get("config") else None
    lines = diagnosis_lines(fresh, recommended=recommended,
                            class_of=lambda c: classes.get(c.key(), c.key()),
                            workload=str(attrs.workload or "the workload"),
                            script=bool(attrs.script_command))
    return {"where_the_time_goes": lines, "budget": attrs.budget_account}


def accuracy_of(r: Record, attrs: StudyAttrs | dict[str, Any]) -> float | None:
    """Quality is measured once per math class and stored on the study (a class measured after
    this trial was recorded still counts); the trial's second objective cannot tell "not
    measured" (stored as 0.0) from a real 0.0."""
    ev = stored_classes(attrs).get(r.result.math_class or "")
    sample = ev.sample() if ev else None
    return sample.mean if sample else r.accuracy


def failures(recs: list[Record]) -> list[Failure]:
    groups: dict[str, list[tuple[int | None, str]]] = {}
    for r in recs:
        if r.outcome != Outcome.OK:
            groups.setdefault(r.outcome, []).append((r.number, r.reason))
    out = []
    for outcome, items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        number, reason = next(((n, why) for n, why in items if why), items[0])
        out.append(Failure(outcome=outcome, count=len(items), example=reason or "(no reason stored)",
                           trial=number))
    return out
