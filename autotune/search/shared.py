"""A search shared by several processes or machines: one study, coordinated through the study.

Every worker runs `autotune search` against the same storage (a PostgreSQL URL across machines).
They talk only through the study, with Optuna's public API:
- a configuration is claimed on the RUNNING trial that will measure it (records.CLAIM_KEY), after
  re-reading the study's RUNNING and COMPLETE trials, so no configuration runs twice;
- each worker registers itself (attrs.WORKER_PREFIX attrs on the study) with the wall-clock end of
  its budget; the last one to finish searching claims verification (attrs.VERIFIER), verifies every
  worker's candidates and writes the recommendation once; the others wait for it.

Why a lock, not an optimistic claim: Optuna has no compare-and-set on attributes. Two workers that
each write their claim and then read the others' are guaranteed only that *one* of them sees the
other; with no ordering between one's trial number and the other's read, no winner rule is safe
without a second round. So read-then-claim runs under a study-wide lock held for milliseconds:
a PostgreSQL advisory lock (session-level, so a worker that dies releases it with its connection;
no table of ours in the user's database), or an flock beside an SQLite/journal file (several
searches on one machine with --allow-concurrent).
"""
from __future__ import annotations

import time
import uuid
from typing import Any, Callable

import optuna
from optuna.trial import TrialState

from ..config import Config
from ..result import StrEnum
from ..study.owners import owner_alive, this_process
from ..study import attrs as A
from ..study.records import (READ_STATES, Record, Role, claim_of, unrun_attrs, has_record,
                             record_of, write_claim)
from .study_lock import StudyLock


class Claim(StrEnum):
    """What taking a configuration gave: run it, reuse a measurement, or leave it."""
    MINE = "mine"    # claimed by this worker: run it
    DONE = "done"    # some worker measured it: its record comes with it
    BUSY = "busy"    # another live worker is measuring it now


class ConfigClaims:
    """Claims configurations on RUNNING trials so that no two workers measure the same one."""

    def __init__(self, study: optuna.Study, lock: StudyLock, key: Callable[[Config], str], *,
                 deadline: float | None = None):
        self.study, self.lock, self.key, self.deadline = study, lock, key, deadline
        self.token = uuid.uuid4().hex     # this search's claims, even beside another in-process
        self.owner = this_process()
        # trial number -> (canonical key, record) of a COMPLETE trial (None: not a measurement)
        self._done: dict[int, tuple[str, Record] | None] = {}

    def claim(self, config: Config, trial: optuna.Trial | Callable[[], optuna.Trial]
              ) -> tuple[Claim, Record | None, optuna.Trial | None]:
        """(MINE, None, trial) after claiming `config` on `trial` (or on one made by calling
        it: references have no trial until claimed); (DONE, record, None) when some worker
        measured it; (BUSY, None, None) while another live worker is measuring it."""
        want = self.key(config)
        with self.lock.held():
            done, busy = self._scan(want)
            if done is not None:
                return Claim.DONE, done, None
            if busy:
                return Claim.BUSY, None, None
            if callable(trial):
                trial = trial()
            write_claim(trial, {"key": want, "token": self.token, "owner": self.owner,
                                "deadline": self.deadline})
        return Claim.MINE, None, trial

    def release(self, trial: optuna.Trial, why: str) -> None:
        """End a sampled trial whose configuration another worker is measuring: PRUNED (not run;
        FAIL means interrupted here), which TPE leaves out, so the sampler may propose it again
        once its result is in, and then that result is reused."""
        leave_unrun(self.study, trial, why, Role.DUPLICATE)

    def accuracy(self, math_key: str, measure: Callable[[], tuple[float | None, float]]
                 ) -> tuple[float | None, float]:
        """The accuracy of one (global batch, precision), measured by one worker: stored ->
        reused; being measured by another live worker -> wait for it; else claim and measure.
        `measure` stores it with attrs.write_accuracy(study, math_key, ...)."""
        while True:
            with self.lock.held():
                attrs = A.StudyAttrs.of(self.study)
                if attrs.has_accuracy(math_key):
                    return attrs.accuracy(math_key), 0.0
                c = attrs.accuracy_claim(math_key)
                if not (isinstance(c, dict) and c.get("token") != self.token and
                        owner_alive(c.get("owner", {}), c.get("deadline"))):
                    A.write_accuracy_claim(self.study, math_key, {
                        "token": self.token, "owner": self.owner, "deadline": self.deadline})
                    break
            time.sleep(1.0)  # another worker's accuracy run: about one trial
        return measure()

    def busy_keys(self) -> set[str]:
        return {c["key"] for c in self._live_claims()}

    def _scan(self, want: str) -> tuple[Record | None, bool]:
        # RUNNING first: a trial that completes between the two reads is then seen in the second
        # (claims themselves cannot appear meanwhile: they are written under the lock we hold).
        busy = any(c["key"] == want for c in self._live_claims())
        for t in self.study.get_trials(deepcopy=False, states=READ_STATES):
            if t.number not in self._done:   # a finished trial's attributes no longer change
                r = record_of(t) if has_record(t) else None
                self._done[t.number] = ((self.key(r.config), r)
                                        if r is not None and r.role != Role.REPEAT else None)
            done = self._done[t.number]
            if done is not None and done[0] == want:
                return done[1], False
        return None, busy

    def _live_claims(self) -> list[dict[str, Any]]:
        claims = []
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            c = claim_of(t)
            if isinstance(c, dict) and c.get("token") != self.token and \
                    owner_alive(c.get("owner", {}), c.get("deadline")):
                claims.append(c)
        return claims


class Workers:
    """The workers of one shared search, registered on the study; picks the one that verifies.

    The last worker to finish searching verifies: by then every worker's trials are in the study,
    and (on one machine) nothing else runs beside its interleaved rounds. The claim lists the
    workers it covers; a covered worker waits for that claim's recommendation instead of
    verifying again. A worker that joins later (a resumed search) verifies on its own turn."""

    def __init__(self, study: optuna.Study, lock: StudyLock, *, budget_s: float):
        self.study, self.lock = study, lock
        self.owner = this_process()
        self.id = f"{self.owner['host']}:{self.owner['pid']}:{uuid.uuid4().hex[:6]}"
        self.deadline = time.time() + budget_s
        self._done = False

    def join(self) -> int:
        """Register as searching; returns how many other live workers are searching."""
        with self.lock.held():
            others = len(self._searching(A.StudyAttrs.of(self.study)))
            self._set("searching")
        return others

    def turn(self) -> tuple[str, Any]:
        """After searching: ('verify', None) when this worker verifies now (its claim is written);
        ('read', rec) when a verifier covering this worker wrote `rec` (a dict; {} for none);
        ('wait', why) otherwise: ask again after a pause."""
        with self.lock.held():
            if not self._done:
                self._set("searched")
                self._done = True
            attrs = A.StudyAttrs.of(self.study)
            v = attrs.verifier
            other = isinstance(v, dict) and v.get("id") != self.id
            running = other and v.get("state") == "verifying" and \
                owner_alive(v.get("owner", {}), v.get("deadline"))
            if other and self.id in v.get("covers", ()):
                if v.get("state") == "done":
                    return "read", attrs.recommendation or {}
                if running:
                    return "wait", f"worker {v['id']} is verifying every worker's candidates"
            busy = self._searching(attrs)
            if busy:
                return "wait", f"{len(busy)} other worker(s) still searching ({', '.join(busy)})"
            if running:
                return "wait", f"worker {v['id']} is verifying an earlier round"
            covers = [k for k, w in attrs.workers.items()
                      if isinstance(w, dict) and w.get("state") == "searched"]
            A.write_verifier(self.study, {"id": self.id, "owner": self.owner,
                                          "deadline": self.deadline,
                                          "state": "verifying", "covers": covers})
        return "verify", None

    def verified(self, state: str = "done") -> None:
        """The recommendation is written, or none could be ("done"), or verification was cut
        short ("abandoned"): the waiting workers read it, or take over at once."""
        with self.lock.held():
            v = A.StudyAttrs.of(self.study).verifier
            if isinstance(v, dict) and v.get("id") == self.id and v.get("state") == "verifying":
                A.write_verifier(self.study, {**v, "state": state})

    def _searching(self, attrs: A.StudyAttrs) -> list[str]:
        out = []
        for k, w in attrs.workers.items():
            if k != self.id and isinstance(w, dict) and w.get("state") == "searching" and \
                    owner_alive(w.get("owner", {}), w.get("deadline")):
                out.append(k)
        return out

    def _set(self, state: str) -> None:
        A.write_worker(self.study, self.id, {"owner": self.owner, "state": state,
                                             "deadline": self.deadline})


def leave_unrun(study: optuna.Study, trial: optuna.Trial, why: str, role: str) -> None:
    """End a sampled trial without running it: PRUNED with `role` and `why` (records.unrun_attrs);
    it has no record, so reports and the dashboard list it as stored."""
    for key, value in unrun_attrs(why, role).items():
        trial.set_user_attr(key, value)
    study.tell(trial, state=TrialState.PRUNED)
