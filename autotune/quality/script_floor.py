"""The noise floor of a user's script (script mode with --accuracy): the default launch's reported
accuracy over seeds, the spread each configuration's single reported number is gated against
(verdict.judge_single_run). A built-in workload's floor is the QualityBook's default class.
"""
from __future__ import annotations

from typing import Any, Callable

import optuna

from ..config import Config
from ..progress import Progress
from ..result import Evaluate, Outcome, TrialResult
from ..study import attrs as A
from .gate import Sample
from .verdict import accuracy_violation, judge_single_run


def stored_script_floor(study_attrs: dict[str, Any] | A.StudyAttrs) -> Sample | None:
    """The stored floor, when it has the spread the gate needs (2 values or more)."""
    values = A.StudyAttrs(study_attrs).script_noise_floor.get("values") or []
    return Sample(tuple(values)) if len(values) >= 2 else None


def measure_script_floor(study: optuna.Study, evaluate: Evaluate, config: Config,
                         first: TrialResult, seeds: tuple[int, ...], *,
                         time_left: Callable[[], float],
                         progress: Progress) -> Sample | None:
    """The default launch's --accuracy over `seeds`: measured once (the first seed is the
    reference run `first` itself), kept on the study for resumes and the report."""
    if stored_script_floor(A.StudyAttrs.of(study)) is not None or len(seeds) < 2 \
            or first.accuracy is None:
        return stored_script_floor(A.StudyAttrs.of(study))
    more = seeds[1:]
    if time_left() < first.seconds * len(more):
        progress.note("no budget for the script's accuracy noise floor: the gate compares "
                      "single measurements")
        return None
    values, used = [first.accuracy], [seeds[0]]
    for seed in more:
        progress.note(f"accuracy noise floor: default launch, seed {seed}")
        ev = evaluate(config, "throughput", seed=seed)
        if ev.outcome == Outcome.OK and ev.accuracy is not None:
            values.append(ev.accuracy)
            used.append(seed)
    A.write_script_noise_floor(study, {"seeds": used, "values": values})
    return stored_script_floor(A.StudyAttrs.of(study))


def judge_reported(accuracy: float | None, floor: Sample | None, *, base_accuracy: float | None,
                   max_drop_pp: float, required: bool) -> tuple[float, dict[str, Any]]:
    """(violation, the TrialResult fields of the verdict) of a script's one reported accuracy:
    gated against the default launch's seeds (`floor`) when it has them, else compared with the
    default launch's single number. With --accuracy (`required`) the script promised a number:
    missing it fails the rule, as a built-in workload's missing accuracy does."""
    if accuracy is not None and floor is not None:
        verdict = judge_single_run(floor, accuracy, max_drop_pp)
        return verdict.violation, verdict.trial_fields()
    if (accuracy is not None or required) and base_accuracy is not None:
        return accuracy_violation(accuracy, base_accuracy, max_drop_pp), {}
    return 0.0, {}
