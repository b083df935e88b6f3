"""A user's script as a trial: its run scored from what it printed or reported (measure/script.py
for the order of preference), a teardown abort after its last metric forgiven, and what its
processes showed from outside (the knobs that did not act)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import WorkloadError
from ..measure.script import ScriptMetric
from ..measure.split import split_of_report
from ..measure.stats import quantile
from ..plan.launch_plan import LaunchPlan
from ..result import Outcome, TrialResult
from .bounded import last_metric_end, score_output
from .classify import abort_in_teardown
from .outcome import RunResult


def script_measured(plan: LaunchPlan, run: RunResult, settings: Any
                     ) -> tuple[RunResult, TrialResult | None, dict[str, Any]]:
    """Score a finished script run (see measure/script.py for the order of preference): the run
    (a teardown abort after the last metric counts as ok; no metric is a workload error), the
    measurement when there is one, and the TrialResult fields that say where it came from."""
    rank0 = plan.ranks[0]
    log_text = run.script_log      # read by the runner through the trial folder
    if not run.ok:
        run = aborted_in_teardown(run, plan, settings, log_text)
    if not run.ok:
        return run, None, {"metric_source": "worker"}
    report = run.script_report
    script = settings.script
    try:
        sm = score_output(report=report if isinstance(report, dict) else None, log_text=log_text,
                          metric=script.metric, wall_seconds=run.wall_seconds,
                          accuracy=script.accuracy, lower_is_better=script.lower_is_better)
    except WorkloadError as exc:   # a pattern past its deadline fails the trial, not the search
        sm = ScriptMetric(value=None, source="pattern", problem=str(exc))
    if sm.value is None:
        tail = run.tails[0] if run.tails else ""
        failed = replace(run, outcome=Outcome.WORKLOAD_ERROR, reason=sm.problem,
                         log_tail=f"--- rank 0 ({rank0.log_path}) ---\n{tail}")
        return failed, None, {"metric_source": sm.source}
    values = sorted(sm.values) or [sm.value]
    # a script has no timed window of its own: its "step" is the whole run
    split = _reported_split(report)
    measured = TrialResult(outcome=Outcome.OK, throughput=sm.value,
                           throughput_iqr=quantile(values, 0.75) - quantile(values, 0.25),
                           step_median_s=run.wall_seconds, step_iqr_s=0.0,
                           timed_steps=len(sm.values), accuracy=sm.accuracy,
                           split=split.to_json() if split else None)
    return run, measured, {"metric_source": sm.source, "metric_shown": sm.shown}


def _reported_split(report: Any):
    """The split a script gave autotune.report_metrics (None: it gave none)."""
    phases = report.get("split") if isinstance(report, dict) else None
    if not isinstance(phases, dict):
        return None
    step = phases.get("step")
    return split_of_report(phases, 1, float(step), source="script") \
        if isinstance(step, (int, float)) and step > 0 else None


def aborted_in_teardown(run: RunResult, plan: LaunchPlan, settings: Any,
                         log_text: str) -> RunResult:
    """A crash that was only SIGABRT after rank 0's last --metric line counts as ok, with a note
    (gloo aborts in teardown now and then; the training was measured in full)."""
    last = None
    metric = settings.script.metric if settings.script else None
    if run.outcome == Outcome.CRASH and metric is not None:
        try:
            last = last_metric_end(log_text, metric)
        except WorkloadError:      # past its deadline: the crash stands as it was
            return run
    note = abort_in_teardown(
        run.exit_codes, list(run.tails) or [""] * len(plan.ranks),
        rank0_after_last_metric=log_text[last:] if last is not None else None,
        signalled=run.signalled)
    if note is None:
        return run
    return replace(run, outcome=Outcome.OK, reason="", log_tail="", notes=(*run.notes, note))


def observed_fields(observations, unacted) -> dict[str, Any]:
    """What a script trial's processes showed, as TrialResult fields: per rank, and the knobs
    that did not act ({knob: the first message about it}) for the search and the export."""
    from ..probe.parse import format_cpulist
    overridden: dict[str, str] = {}
    for u in unacted:
        overridden.setdefault(u.knob, u.message)
    return {"observed": tuple({"rank": o.rank, "busy_threads": o.busy_threads,
                               "num_threads": o.num_threads, "affinity": format_cpulist(o.affinity),
                               "libraries": list(o.libraries), "mempolicy": o.mempolicy,
                               "processes": o.num_processes} for o in observations),
            "unacted": tuple(u.message for u in unacted), "overridden": overridden}
