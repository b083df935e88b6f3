"""Which process owns a RUNNING trial, and recovering the trials of searches that were killed.

A search claims each trial it starts (a system attr naming host, pid and start time); a trial
left RUNNING by a search that no longer runs becomes FAIL with reason 'interrupted', while one
whose search is alive (another search on the same storage) is left alone.
"""
from __future__ import annotations

import os
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from .records import interrupted_attrs
from .storage import storage_of, trial_id


_OWNER_KEY = "autotune:owner"


# A trial is claimed right after ask(); one younger than this without an owner may be another
# search's, caught between the two writes.
_UNCLAIMED_GRACE_S = 60.0


_REMOTE_GRACE_S = 120.0


def this_process() -> dict[str, Any]:
    import socket

    import psutil
    return {"host": socket.gethostname(), "pid": os.getpid(),
            "started": psutil.Process().create_time()}


def claim_trial(study: optuna.Study, trial: optuna.Trial) -> None:
    """Mark a RUNNING trial as this process's, so a search started beside it (--allow-concurrent,
    same storage) can tell it from one a killed search left behind."""
    storage_of(study).set_trial_system_attr(trial_id(study, trial.number), _OWNER_KEY,
                                            this_process())


def _owner_alive(t: FrozenTrial) -> bool:
    import datetime
    owner = t.system_attrs.get(_OWNER_KEY)
    if not isinstance(owner, dict):
        start = t.datetime_start
        age = (datetime.datetime.now() - start).total_seconds() if start else float("inf")
        return age < _UNCLAIMED_GRACE_S
    return owner_alive(owner)


def owner_alive(owner: dict[str, Any], deadline: float | None = None) -> bool:
    """Whether the process `owner` (from this_process) still runs: checked on this host; on
    another host nothing here can tell, so it is presumed alive until `deadline` (epoch seconds,
    the end of its budget) plus a grace for its last trial's kill and writes, or for ever."""
    import socket
    import time

    import psutil
    if owner.get("host") != socket.gethostname():
        return deadline is None or time.time() < deadline + _REMOTE_GRACE_S
    try:
        proc = psutil.Process(int(owner["pid"]))
        # the same pid with another start time is an unrelated process that reused it
        return abs(proc.create_time() - float(owner["started"])) < 1.0 and \
            proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, KeyError, TypeError, ValueError):
        return False


def fail_stale_running(study: optuna.Study) -> int:
    """Trials left RUNNING by a search that was killed (kill -9, power loss) become FAIL with
    reason 'interrupted'. A trial whose search is still alive (another search on this storage,
    started with --allow-concurrent) is left alone: failing it would crash that search when it
    records the result."""
    n = 0
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if _owner_alive(t):
            continue
        storage, tid = storage_of(study), trial_id(study, t.number)
        for key, value in interrupted_attrs("the search was killed during this trial").items():
            storage.set_trial_user_attr(tid, key, value)
        storage.set_trial_state_values(tid, TrialState.FAIL)
        n += 1
    return n
