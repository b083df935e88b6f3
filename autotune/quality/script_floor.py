"""The noise floor of a user's script (script mode with --accuracy): the default launch's reported
accuracy over seeds. A configuration's own runs on the same seeds are paired with them, as a
built-in workload's classes are (quality/gate.paired): the trial itself ran the first seed, and a
configuration that contends for the lead runs the others. One run alone is bounded as one new run
of the default would be (gate.single_run), which rarely shows anything; a script that takes no
seed cannot be paired, and its verdict says what would show it. A built-in workload's floor is
the QualityBook's default class.
"""
from __future__ import annotations

from typing import Any, Callable

import optuna

from ..config import Config
from ..progress import Progress
from ..result import Evaluate, Outcome, TrialResult
from ..study import attrs as A
from .gate import Sample
from .gate import paired
from .verdict import QualityStatus, QualityVerdict, accuracy_violation, judge_single_run, status_of

# What a script that takes no seed is told about its accuracy verdict.
UNPAIRED = ("its runs cannot be paired with the default launch's: give the script a seed "
            "({seed} in its command, or $AUTOTUNE_SEED) to show its accuracy")


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


def floor_by_seed(study_attrs: dict[str, Any] | A.StudyAttrs) -> dict[int, float]:
    """{seed: the default launch's reported accuracy} of the stored floor ({} without one)."""
    floor = A.StudyAttrs(study_attrs).script_noise_floor
    seeds, values = floor.get("seeds") or [], floor.get("values") or []
    return {int(s): float(v) for s, v in zip(seeds, values)} if len(seeds) == len(values) else {}


def judge_reported(accuracy: float | None, floor: Sample | None, *, base_accuracy: float | None,
                   max_drop_pp: float, required: bool, own: dict[int, float] | None = None,
                   floor_seeds: dict[int, float] | None = None,
                   seeded: bool = True) -> tuple[float, dict[str, Any]]:
    """(violation, the TrialResult fields of the verdict) of a script's reported accuracy:
    paired with the default launch's runs seed by seed when the configuration has runs of 2 or
    more of its seeds (`own`, `floor_seeds`: {seed: accuracy}); else its one run bounded against
    the default's seeds (`floor`); else compared with the default launch's single number. With
    --accuracy (`required`) the script promised a number: missing it fails the rule, as a
    built-in workload's missing accuracy does. `seeded`: False for a script that takes no seed,
    whose verdict then says so."""
    if own and floor_seeds and len(set(own) & set(floor_seeds)) >= 2:
        bound = paired(floor_seeds, own, max_drop_pp)
        verdict = QualityVerdict(status=status_of(bound), gate=bound,
                                 sample=Sample(tuple(own[s] for s in sorted(own))))
        return verdict.violation, verdict.trial_fields()
    if accuracy is not None and floor is not None:
        verdict = judge_single_run(floor, accuracy, max_drop_pp)
        return verdict.violation, verdict.trial_fields()
    if accuracy is None:
        return (1.0 if required and base_accuracy is not None else 0.0), {}
    if base_accuracy is None:
        return 0.0, {}
    # one number against one: no spread, nothing shown; never recommended as keeping accuracy
    why = UNPAIRED if not seeded else ("the default launch's seeds were not measured (no budget "
                                       "for its noise floor): nothing to bound a drop with")
    verdict = QualityVerdict(status=QualityStatus.NOT_SHOWN, why=why)
    return max(accuracy_violation(accuracy, base_accuracy, max_drop_pp), 1e-6), \
        verdict.trial_fields()
