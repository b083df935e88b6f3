"""`autotune verify`: the study's current recommendation measured again against the default
launch, interleaved and adaptive as at the end of a search, without a new search.

The way to a figure you can trust after a search on a busy machine: run it when the machine is
quiet. The new verification replaces the stored one only when most of its rounds were quiet, so
a re-run under load cannot overwrite a good figure with a disturbed one.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from ..config import Config
from ..progress import SILENT, Progress
from ..errors import StorageError
from ..result import Evaluate, Outcome, TrialResult
from ..study.attrs import StudyAttrs
from ..study.records import Record, Role, records
from .verify import Recommendation, verify


@dataclass(frozen=True, kw_only=True)
class Reverified:
    recommendation: Recommendation
    previous: str                 # the stored headline it was measured against
    replaces: bool                # quiet enough to replace the stored recommendation
    why_kept: str = ""            # why the stored one stays

    def to_json(self) -> dict[str, Any]:
        return {"recommendation": self.recommendation.to_json(), "previous": self.previous,
                "stored": self.replaces, "why_kept": self.why_kept}


def lineup(study) -> tuple[Record, Record]:
    """(default launch, recommended configuration) as stored by the search."""
    rec = StudyAttrs.of(study).recommendation
    if not rec or not isinstance(rec.get("config"), dict):
        raise StorageError(f"study {study.study_name!r} has no recommendation to verify (the "
                           "search was interrupted or is still running); finish `autotune "
                           "search` first")
    config = Config.from_dict(rec["config"], where="stored recommendation")
    stored_default = next((r for r in records(study) if r.role == Role.DEFAULT), None)
    base = stored_default.config if stored_default is not None else Config()
    default = Record(config=base, role=Role.DEFAULT, feasible=True,
                     result=TrialResult(outcome=Outcome.OK,
                                        throughput=rec.get("default_throughput")))
    chosen = Record(config=config, role="recommended", feasible=True,
                    result=TrialResult(outcome=Outcome.OK, throughput=rec.get("throughput"),
                                       accuracy=rec.get("accuracy")))
    return default, chosen


def reverify(study, evaluate: Evaluate, *, rounds: int, time_left: Callable[[], float],
             progress: Progress = SILENT) -> Reverified:
    """Measure the stored recommendation against the default launch again (speed only: its
    quality was confirmed by the search, and the configuration has not changed)."""
    default, chosen = lineup(study)
    stored = StudyAttrs.of(study).recommendation
    if chosen.config == default.config:
        raise StorageError(f"study {study.study_name!r} recommends the default launch: there is "
                           "no speedup to verify")
    rec = verify([chosen], default, evaluate, rounds=rounds, time_left=time_left,
                 progress=progress)
    rec = dataclasses.replace(rec, accuracy=stored.get("accuracy"),
                              default_accuracy=stored.get("default_accuracy"))
    mine = rec.candidates[0].settling if rec.candidates else None
    if mine is None:
        return Reverified(recommendation=rec, previous=stored.get("headline") or "", replaces=False,
                          why_kept="no round completed on both sides")
    if mine.quiet_rounds * 2 <= mine.rounds:
        return Reverified(recommendation=rec, previous=stored.get("headline") or "", replaces=False,
                          why_kept=f"other processes took the cores in {mine.rounds - mine.quiet_rounds}"
                                   f" of {mine.rounds} rounds; run it again when the machine is quiet")
    return Reverified(recommendation=rec, previous=stored.get("headline") or "", replaces=True)


def store_unless_replaced(study, url: str, measured: dict | None, result: Reverified,
                          save: Callable[[Recommendation], Any]) -> Reverified:
    """Store `result`'s recommendation with `save` if it `replaces` the stored one and the
    stored one is still `measured`, the one verify re-measured: under the study lock that a
    shared search holds when it stores its own, so that a search that stored a new
    recommendation meanwhile keeps it (verify used to overwrite it with the old configuration)."""
    from ..search.study_lock import StudyLock
    lock = StudyLock(url, study.study_name)
    try:
        with lock.held():
            if StudyAttrs.of(study).recommendation != measured:
                return dataclasses.replace(result, replaces=False, why_kept=(
                    "a search stored a new recommendation while this ran; run `autotune "
                    "verify` again to measure that one"))
            if result.replaces:
                save(result.recommendation)
    finally:
        lock.close()
    return result
