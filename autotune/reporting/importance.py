"""Which knobs mattered for throughput: PED-ANOVA over a study's feasible search trials."""
from __future__ import annotations

import optuna
from optuna.trial import TrialState

from ..study.records import Role, has_record, record_of

MIN_IMPORTANCE_TRIALS = 5


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
              and (r := record_of(t)).role == Role.SEARCH and r.feasible]
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
