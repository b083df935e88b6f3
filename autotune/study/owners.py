"""Which process owns a RUNNING trial, and recovering the trials of searches that were killed.

A search claims each trial it starts (a system attr naming host, machine, pid, start time and
the end of its budget); a trial left RUNNING by a search that no longer runs becomes FAIL with
reason 'interrupted', while one whose search is alive (another search on the same storage) is
left alone. The pid is checked only on the same machine (process_identity.machine(): boot id and
pid namespace): containers share a hostname, and a pid read across them names another process.
A search elsewhere is presumed alive until its deadline (plus a grace), never for ever.
"""
from __future__ import annotations

import os
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ..util.process_identity import alive, machine
from . import bounded
from .records import interrupted_attrs
from .storage import storage_of, trial_id


_OWNER_KEY = "autotune:owner"


# A trial is claimed right after ask(); one younger than this without an owner may be another
# search's, caught between the two writes.
_UNCLAIMED_GRACE_S = 60.0


_REMOTE_GRACE_S = 120.0

# A RUNNING trial claimed on another machine by a version that stored no deadline: presumed
# abandoned this long after it started (a trial's own timeout is a quarter of its budget).
_UNDATED_REMOTE_S = 24 * 3600.0


def this_process() -> dict[str, Any]:
    """This process as stored on a study; "host" stays for people and for older readers."""
    import socket

    import psutil
    return {"host": socket.gethostname(), "machine": machine(), "pid": os.getpid(),
            "started": psutil.Process().create_time()}


def claim_trial(study: optuna.Study, trial: optuna.Trial, *, deadline: float | None = None
                ) -> None:
    """Mark a RUNNING trial as this process's, so a search started beside it (--allow-concurrent,
    same storage) can tell it from one a killed search left behind. `deadline` (epoch seconds):
    the end of this search's budget, after which a search on another machine that finds the
    trial still RUNNING may take it for abandoned."""
    owner = this_process() if deadline is None else {**this_process(), "deadline": deadline}
    storage_of(study).set_trial_system_attr(trial_id(study, trial.number), _OWNER_KEY, owner)


def _owner_alive(t: FrozenTrial) -> bool:
    import datetime
    owner = t.system_attrs.get(_OWNER_KEY)
    if not isinstance(owner, dict):
        start = t.datetime_start
        age = (datetime.datetime.now() - start).total_seconds() if start else float("inf")
        return age < _UNCLAIMED_GRACE_S
    deadline = owner.get("deadline")
    if not isinstance(deadline, (int, float)) and t.datetime_start is not None:
        deadline = t.datetime_start.timestamp() + _UNDATED_REMOTE_S
    return owner_alive(owner, deadline)


def owner_alive(owner: dict[str, Any], deadline: float | None = None) -> bool:
    """Whether the process `owner` (from this_process) still runs: checked here when it ran on
    this machine; on another nothing here can tell, so it is presumed alive until `deadline`
    (epoch seconds, the end of its budget) plus a grace for its last trial's kill and writes, or
    for ever without one. An owner stored before "machine" was is placed by its hostname."""
    import socket
    import time
    if not isinstance(owner, dict):
        return False
    if "machine" in owner:
        here = owner["machine"] == machine()
    else:
        here = owner.get("host") == socket.gethostname()
    if not here:   # a deadline no search writes (Infinity, a year ahead) has passed already
        deadline = bounded.deadline(deadline)
        return deadline is None or time.time() < deadline + _REMOTE_GRACE_S
    try:
        return alive(int(owner["pid"]), float(owner["started"]))
    except (KeyError, TypeError, ValueError):
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
