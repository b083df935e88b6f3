"""The study as `autotune dashboard` shows it: every trial with what was measured, derived when read
from the trials and the study's quality evidence as stored now. Nothing is written: a study of any
earlier autotune is shown by the same rules (docs/dashboard.md).

- A measured launch is COMPLETE at (throughput, its class's measured quality): the same accuracy
  `report` shows (`accuracy_of`: a class measured after the trial was stored counts, the default
  launch's math shares the default's). A class never measured carries -inf: the dashboard draws
  no point for a value that is not finite, and PED-ANOVA leaves it out of the accuracy
  importance, so that importance is computed from measured classes only.
- Its constraint is met exactly when `report`'s row is feasible (its "tol" is ok), so the
  dashboard's Pareto front (non-dominated feasible trials) holds `report`'s configurations.
- A configuration ruled out before launch, and a repeat (the sampler proposing a configuration
  already measured: its trial mirrors another), never ran: PRUNED without values, listed in the
  table, drawn in no chart.
- A launch that failed (crash, oom, timeout, ...) ran and measured nothing: FAIL, with its
  outcome and reason.
- Beside the stored attributes, the summary's words as table columns: the class's verdict, the
  step's split and the share of the ceiling, with numbers the dashboard can sort by.
"""
from __future__ import annotations

import copy
import math
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from ..measure.split import ceiling_words, split_from
from ..result import Outcome
from ..study.attrs import StudyAttrs
from ..study.records import READ_STATES, Record, Role, has_record, record_of
from . import quality as QR
from .report import accuracy_of, tolerance_of

NOT_MEASURED = float("-inf")
CONSTRAINT_KEYS = ("constraints", "constraints:feasible")
# The columns added to a measured trial (user attributes; the dashboard sorts numeric ones).
VERDICT = "verdict"                    # the class's verdict, in the summary's words
DROP_BOUND = "drop bound (pp)"         # its 95% upper bound of the drop, a number to sort by
STEP = "step"                          # where the step's time went ('data 62%, compute 30%')
OF_CEILING = "of ceiling (%)"          # throughput as a share of its class's ceiling
CEILING_WORDS = "ceiling"              # the same share in the summary's words
NEVER_RAN = "never ran"                # why a trial has no point: the reason, or the repeat


def shown_trials(trials: list[FrozenTrial], attrs: StudyAttrs) -> list[FrozenTrial]:
    """`trials` as the dashboard shows them (copies; the stored ones are left as they are)."""
    return [shown_trial(t, attrs) for t in trials]


def shown_trial(t: FrozenTrial, attrs: StudyAttrs) -> FrozenTrial:
    """One trial as shown (see the module doc); one without a record (a claim, a duplicate
    another worker measured) as stored."""
    if t.state not in READ_STATES or not has_record(t):
        return t
    r = record_of(t)
    shown = copy.copy(t)
    if r.role == Role.REPEAT or r.outcome == Outcome.INFEASIBLE:
        why = f"a repeat of trial {r.result.reused_from}, not a launch" \
            if r.role == Role.REPEAT else r.reason
        _set(shown, TrialState.PRUNED, None, {**t.user_attrs, NEVER_RAN: why})
    elif r.outcome != Outcome.OK or r.throughput is None:
        _set(shown, TrialState.FAIL, None, dict(t.user_attrs))
    else:
        _measured(shown, r, attrs)
    return shown


def _measured(shown: FrozenTrial, r: Record, attrs: StudyAttrs) -> None:
    verdict = QR.verdict(attrs, r.result)
    acc = accuracy_of(r, attrs)
    feasible = tolerance_of(r, verdict) == "ok"
    user = {k: v for k, v in shown.user_attrs.items() if k != "accuracy"}
    if acc is not None and math.isfinite(acc):
        user["accuracy"] = acc
    if r.result.quality is not None or r.result.math_class is not None:
        user[VERDICT] = verdict.claim
    if verdict.gate is not None and math.isfinite(verdict.gate.upper_pp):
        user[DROP_BOUND] = round(verdict.gate.upper_pp, 3)
    split = split_from(r.result.split)
    if split is not None:
        user[STEP] = split.brief()
    if r.result.of_ceiling is not None:
        user[OF_CEILING] = round(100.0 * r.result.of_ceiling, 1)
        user[CEILING_WORDS] = ceiling_words(r.result.of_ceiling)
    values = [float(r.throughput), acc if acc is not None and math.isfinite(acc)
              else NOT_MEASURED]
    stored = max(shown.constraints.values(), default=0.0)
    constraint = min(stored, 0.0) if feasible else (stored if stored > 0 else 1.0)
    _set(shown, TrialState.COMPLETE, values, user, constraint)


def _set(shown: FrozenTrial, state: TrialState, values: list[float] | None,
         user: dict[str, Any], constraint: float | None = None) -> None:
    shown.state = state
    shown.values = values
    shown.user_attrs = user
    if constraint is not None:
        system = dict(shown.system_attrs)
        system[CONSTRAINT_KEYS[0]] = [constraint]
        system[CONSTRAINT_KEYS[1]] = constraint
        shown.system_attrs = system
