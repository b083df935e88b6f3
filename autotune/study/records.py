"""Trials as stored and read back: one `Record` per evaluated configuration, the roles a trial
plays in a study (the only place they are named), and the one conversion between a trial's
result and Optuna's user attributes.

A `Record` is a stored trial: its configuration, the role it played, its number, whether it met
every constraint, and its `TrialResult` (autotune/result.py), the same typed value the runner
returned and the search judged. The record wraps the result instead of merging with it: role,
number and feasibility belong to the study, and an evaluation has none of them until stored.

Stored form (the keys autotune has always written, so old studies load and optuna-dashboard
shows them): every TrialResult field under its own name as JSON (tuples as lists), except
throughput, which is the trial's first objective; a field at its default is left out (and read
back as the default). Beside them: schema_version, autotune_version, config, config_key and role, and, derived,
wall_seconds (rounded seconds of a launched run) and metric_note (what metric_source means).
Reading takes the keys it knows and ignores the rest (a claim, keys of other versions).

Every stored trial carries the schema version, autotune version and full config, so a study can
be read a year later. A trial without a measurement (ruled out before launch, crashed, ...) is
stored PRUNED with a violated constraint (TPE learns to avoid it; the dashboard draws no point
at 0 samples/s for it); studies written before stored it COMPLETE at (0.0, 0.0), and read the
same. Only interruptions are stored as FAIL.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from .. import __version__
from ..config import Config
from ..measure.script import SOURCES
from ..probe.topology import SCHEMA_VERSION
from ..result import Outcome, StrEnum, TrialResult
from .storage import storage_of, trial_id


class Role(StrEnum):
    """The role a trial plays (user attr "role", these very strings). The two references are
    measured first; a repeat is the sampler proposing a configuration already measured: stored
    for the sampler, not a result."""
    SEARCH = "search"
    DEFAULT = "reference:default"
    RUN_CPU = "reference:run_cpu"
    # The default launch with torch.compile, where the space offers compile (issue 59): what a
    # PyTorch 2 user already has without tuning.
    DEFAULT_COMPILED = "reference:default_compiled"
    REPEAT = "repeat"
    # A sampled trial whose configuration another worker was measuring: PRUNED, never run.
    DUPLICATE = "duplicate"
    # A sampled trial the budget left unrun: its compile would have run past the time left for
    # trials (search/spending.compile_cost_s). PRUNED, never run.
    UNRUN = "unrun"


# What the run_cpu reference is, wherever a speedup over it is printed: autotune's own launch
# with the settings run_cpu would choose, not torch.backends.xeon.run_cpu run itself.
RUN_CPU_WORDS = ("run_cpu's settings (torch.backends.xeon.run_cpu's rules, reproduced by "
                 "autotune; torchrun --numa-binding=node on GPUs)")
# Said when the recommendation is that reference's own configuration, so that "1.00x over" it is
# not read as a tie between two launches (the GPU machine's 16-core search, 2026-11-26).
RUN_CPU_WON = ("the recommendation is run_cpu's settings themselves: no configuration the search "
               "measured was verified faster (a longer --budget measures more of them)")


# What the compiled reference is, wherever a figure over it is printed, and what is said when it
# is the recommendation itself (as RUN_CPU_WON).
DEFAULT_COMPILED_WORDS = "the default launch compiled (torch.compile, every other knob default)"
DEFAULT_COMPILED_WON = ("the recommendation is the default launch compiled: no other "
                        "configuration the search measured was verified faster to finish the run")


def recommends_run_cpu(rec: dict[str, Any]) -> bool:
    """Whether a stored recommendation (its JSON) is the run_cpu reference's configuration."""
    return recommends_reference(rec, Role.RUN_CPU)


def recommends_reference(rec: dict[str, Any], role: str) -> bool:
    """Whether a stored recommendation (its JSON) is that reference's configuration."""
    return any(isinstance(c, dict) and c.get("role") == role and c.get("config") == rec.get("config")
               for c in rec.get("candidates") or [])


# A shared search's claim on the RUNNING trial that measures a configuration (search/shared.py):
# {"key", "token", "owner", "deadline"}. Not part of a record: reading one ignores it.
CLAIM_KEY = "autotune:claim"

REASON_LIMIT = 1000
LOG_TAIL_LIMIT = 4000

# optuna-dashboard 0.21 reads constraints only from the list under this old key; Optuna 5 reads
# both that and `constraints:<name>`, so both are written.
_OLD_CONSTRAINTS_KEY = "constraints"


@dataclass(frozen=True, kw_only=True)
class Record:
    """One evaluated configuration as the search sees it (built from a trial or a result)."""
    config: Config
    result: TrialResult
    role: str = Role.SEARCH
    number: int | None = None         # the trial's number in the study (None: not stored)
    feasible: bool = False            # ok, and every constraint (the accuracy rule) met

    # What every reader of a record asks first, read through to the result.
    @property
    def outcome(self) -> str:
        return self.result.outcome

    @property
    def reason(self) -> str:
        return self.result.reason

    @property
    def throughput(self) -> float | None:
        return self.result.throughput

    @property
    def accuracy(self) -> float | None:
        return self.result.accuracy


def record_trial(study: optuna.Study, *, config: Config, result: TrialResult,
                 violation: float = 0.0, role: str = Role.SEARCH,
                 trial: optuna.Trial | None = None, params: dict[str, Any] | None = None,
                 distributions: dict[str, CategoricalDistribution] | None = None) -> Record:
    """Store one result (on `trial`, or as a new trial) and return it as the search sees it.
    A failed trial is stored PRUNED with a violated constraint (so the sampler learns to avoid it:
    TPE ignores FAIL trials); only interruptions are stored as FAIL (`stored_state`)."""
    result = replace(result, reason=result.reason[:REASON_LIMIT],
                     log_tail=result.log_tail[-LOG_TAIL_LIMIT:])
    user = _user_attrs(config, result, role)
    state, values, constraint = stored_state(result, violation)
    if trial is None:
        frozen = optuna.trial.create_trial(
            state=state, values=values, params=params or {}, distributions=distributions or {},
            user_attrs=user,
            system_attrs=({} if constraint is None else
                          {_OLD_CONSTRAINTS_KEY: [constraint], "constraints:feasible": constraint}))
        study.add_trial(frozen)
        number = study.trials[-1].number
    else:
        for k, v in user.items():
            trial.set_user_attr(k, v)
        if constraint is not None:
            trial.set_constraint("feasible", constraint)
            storage_of(study).set_trial_system_attr(trial_id(study, trial.number),
                                                    _OLD_CONSTRAINTS_KEY, [constraint])
        study.tell(trial, values=values, state=state)
        number = trial.number
    return Record(config=config, result=result, role=role, number=number,
                  feasible=constraint is not None and constraint <= 0)


# A placeholder for the sampler, never a reading: Optuna needs a number for every objective of a
# COMPLETE trial (it refuses NaN; +-inf makes the hypervolume multi-objective TPE breaks ties
# with infinite, and the GP sampler's standardised values NaN), and the value is frozen when told while its class is often judged later. The user
# attribute "accuracy" stays None, and `autotune dashboard` and `report` show the class's
# measured quality instead (reporting/shown.py, docs/dashboard.md).
UNMEASURED_ACCURACY = 0.0
# What a trial without a measurement (ruled out before launch, crashed, ...) is stored as: PRUNED
# with a violated constraint. TPE reads COMPLETE and PRUNED trials and puts every one with a
# violated constraint in its infeasible group, so it learns from it exactly as from the
# [0.0, 0.0] COMPLETE trial stored before; the dashboard draws no point for it.
UNMEASURED = TrialState.PRUNED
READ_STATES = (TrialState.COMPLETE, TrialState.PRUNED)


def stored_state(result: TrialResult, violation: float
                 ) -> tuple[TrialState, list[float] | None, float | None]:
    """(state, values, constraint) a result is told to Optuna with (see UNMEASURED)."""
    if result.outcome == Outcome.INTERRUPTED:
        return TrialState.FAIL, None, None
    if not (result.ok and result.throughput is not None):
        return UNMEASURED, None, 1.0
    acc = result.accuracy
    acc = acc if acc is not None and math.isfinite(acc) else UNMEASURED_ACCURACY
    return TrialState.COMPLETE, [float(result.throughput), float(acc)], float(violation)


def records(study: optuna.Study) -> list[Record]:
    """Every stored evaluation, oldest first (interrupted and running ones excluded)."""
    return [record_of(t) for t in study.get_trials(deepcopy=False, states=READ_STATES)
            if has_record(t)]


def has_record(t: FrozenTrial) -> bool:
    """Whether autotune stored a result on this trial (a claimed or pruned one has none)."""
    return "config" in t.user_attrs


def record_of(t: FrozenTrial) -> Record:
    """The record of a trial `has_record` accepts, completed or interrupted (FAIL)."""
    u, result = t.user_attrs, _result_of(t)
    return Record(config=Config.from_dict(u["config"], where=f"trial {t.number}"),
                  result=result, role=u.get("role", Role.SEARCH), number=t.number,
                  feasible=result.ok and all(v <= 0 for v in t.constraints.values()))


def claim_of(t: FrozenTrial) -> Any:
    """A trial's shared-search claim (None: unclaimed; not a dict: unreadable, ignore it)."""
    return t.user_attrs.get(CLAIM_KEY)


def write_claim(trial: optuna.Trial, claim: dict[str, Any]) -> None:
    trial.set_user_attr(CLAIM_KEY, claim)


def interrupted_attrs(reason: str) -> dict[str, str]:
    """The user attributes that mark a trial interrupted (a search killed while it ran)."""
    return {"outcome": Outcome.INTERRUPTED, "reason": reason[:REASON_LIMIT]}


def unrun_attrs(reason: str, role: str) -> dict[str, str]:
    """The user attributes of a sampled trial left unrun: another worker measures its config
    (DUPLICATE), or the budget had no time for it (UNRUN)."""
    return {"role": role, "reason": reason[:REASON_LIMIT]}


# Fields stored as JSON lists and read back as tuples (curve: of pairs).
_TUPLES = {"peak_rss_mb", "observed", "unacted"}
_UNKNOWN = TrialResult(outcome="")   # every field at its default


def _user_attrs(config: Config, result: TrialResult, role: str) -> dict[str, Any]:
    user: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "autotune_version": __version__,
        "config": config.to_dict(), "config_key": config.key(), "outcome": result.outcome,
        "reason": result.reason, "role": role, "accuracy": result.accuracy}
    for f in fields(TrialResult):
        value = getattr(result, f.name)
        if f.name in user or f.name == "throughput" or value == getattr(_UNKNOWN, f.name):
            continue
        if f.name == "curve":
            value = [list(p) for p in value]
        user[f.name] = list(value) if f.name in _TUPLES else value
    if result.mode is not None:
        user["wall_seconds"] = round(result.seconds, 2)
    if result.metric_source is not None:
        user["metric_note"] = SOURCES.get(result.metric_source, "")
    return user


def _result_of(t: FrozenTrial) -> TrialResult:
    u = t.user_attrs
    known: dict[str, Any] = {}
    for f in fields(TrialResult):
        value = u.get(f.name)
        if value is None or f.name == "throughput":
            continue
        if f.name == "curve":
            value = tuple((int(n), float(q)) for n, q in value)
        elif f.name in _TUPLES:
            value = tuple(value)
        known[f.name] = value
    # Only interruptions are stored as FAIL; a search killed mid-trial may have left no outcome.
    known.setdefault("outcome", Outcome.INTERRUPTED if t.state == TrialState.FAIL else "?")
    ok = known["outcome"] == Outcome.OK
    return TrialResult(**known, throughput=t.values[0] if ok and t.values else None)
