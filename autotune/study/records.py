"""Trials as stored and read back: one `Record` per evaluated configuration, and the roles a
trial plays in a study (the only place they are named).

Every stored trial carries the schema version, autotune version and full config, so a study can
be read a year later. A failed trial is stored as a result with a violated constraint (TPE learns
to avoid it); only interruptions are stored as FAIL.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from .. import __version__
from ..config import Config
from ..probe.topology import SCHEMA_VERSION
from ..run import outcome as R
from .storage import storage_of, trial_id

# The roles a trial plays (user attr "role"). The two references are measured first; a repeat
# is the sampler proposing a configuration already measured: stored for the sampler, not a result.
SEARCH_ROLE = "search"
DEFAULT_ROLE = "reference:default"
RUN_CPU_ROLE = "reference:run_cpu"
REPEAT_ROLE = "repeat"

LOG_TAIL_LIMIT = 4000


# optuna-dashboard 0.21 reads constraints only from the list under this old key; Optuna 5 reads
# both that and `constraints:<name>`, so both are written.
_OLD_CONSTRAINTS_KEY = "constraints"


@dataclass(frozen=True, kw_only=True)
class Record:
    """One evaluated configuration as the search sees it (built from a trial or a result)."""
    config: Config
    outcome: str
    reason: str = ""
    throughput: float | None = None
    accuracy: float | None = None
    feasible: bool = False
    role: str = SEARCH_ROLE
    number: int | None = None
    attrs: dict[str, Any] = field(default_factory=dict)


def record_trial(study: optuna.Study, *, config: Config, outcome: str, reason: str = "",
                 throughput: float | None = None, accuracy: float | None = None,
                 violation: float = 0.0, role: str = SEARCH_ROLE, attrs: dict[str, Any] | None = None,
                 trial: optuna.Trial | None = None, params: dict[str, Any] | None = None,
                 distributions: dict[str, CategoricalDistribution] | None = None) -> int:
    """Store one result. A failed trial is stored as a result with a violated constraint (so the
    sampler learns to avoid it: TPE ignores FAIL trials); only interruptions are stored as FAIL."""
    user = {"schema_version": SCHEMA_VERSION, "autotune_version": __version__,
            "config": config.to_dict(), "config_key": config.key(), "outcome": outcome,
            "reason": reason[:1000], "role": role, "accuracy": accuracy, **(attrs or {})}
    if "log_tail" in user:
        user["log_tail"] = str(user["log_tail"])[-LOG_TAIL_LIMIT:]
    ok = outcome == R.OK and throughput is not None
    if outcome == R.INTERRUPTED:
        state, values, constraint = TrialState.FAIL, None, None
    else:
        state = TrialState.COMPLETE
        acc = accuracy if accuracy is not None and math.isfinite(accuracy) else 0.0
        values = [float(throughput), float(acc)] if ok else [0.0, 0.0]
        constraint = float(violation) if ok else 1.0
    if trial is None:
        frozen = optuna.trial.create_trial(
            state=state, values=values, params=params or {}, distributions=distributions or {},
            user_attrs=user,
            system_attrs=({} if constraint is None else
                          {_OLD_CONSTRAINTS_KEY: [constraint], "constraints:feasible": constraint}))
        study.add_trial(frozen)
        return study.trials[-1].number
    for k, v in user.items():
        trial.set_user_attr(k, v)
    if constraint is not None:
        trial.set_constraint("feasible", constraint)
        storage_of(study).set_trial_system_attr(trial_id(study, trial.number),
                                                _OLD_CONSTRAINTS_KEY, [constraint])
    study.tell(trial, values=values, state=state)
    return trial.number


def records(study: optuna.Study) -> list[Record]:
    """Every stored evaluation, oldest first (interrupted and running ones excluded)."""
    out = []
    for t in study.get_trials(deepcopy=False):
        if t.state != TrialState.COMPLETE or "config" not in t.user_attrs:
            continue
        out.append(record_of(t))
    return out


def record_of(t: FrozenTrial) -> Record:
    u = t.user_attrs
    ok = u.get("outcome") == R.OK
    feasible = ok and all(v <= 0 for v in t.constraints.values())
    return Record(config=Config.from_dict(u["config"], where=f"trial {t.number}"),
                  outcome=u.get("outcome", "?"), reason=u.get("reason", ""),
                  throughput=t.values[0] if ok and t.values else None,
                  accuracy=u.get("accuracy"), feasible=feasible, role=u.get("role", SEARCH_ROLE),
                  number=t.number, attrs=dict(u))
