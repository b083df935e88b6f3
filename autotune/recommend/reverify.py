"""`autotune verify`: the study's current recommendation measured again against the default
launch, interleaved and adaptive as at the end of a search, without a new search. When the search
recommended the default launch (no candidate held up, or none settled), verify measures the
search's best candidates again instead, so an unsettled search always has a next step.

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
from ..errors import ConfigError, StorageError
from ..result import Evaluate, Outcome, TrialResult
from ..study.attrs import StudyAttrs
from ..training import QUALITY_SAMPLES
from ..quality.confirm import Confirmation
from ..quality.evidence import QualityBook
from ..quality.gate import showable
from ..quality.looks import (LEAST_LOOK_PAIRS, LOOK_SEEDS, MOST_LOOKS,
                             MOST_SETTLE_PAIRS, next_block, plan_pairs)
from ..quality.verdict import QualityStatus, QualityVerdict
from ..search.lineup import pick_candidates
from ..study.records import Record, Role, records
from .recommendation import Recommendation
from .verify import verify
from .weigh import DEFAULT_RUN_LENGTH, RunLength, Weigher, parse_run_length


@dataclass(frozen=True, kw_only=True)
class Reverified:
    recommendation: Recommendation
    previous: str                 # the stored headline it was measured against
    replaces: bool                # quiet enough to replace the stored recommendation
    why_kept: str = ""            # why the stored one stays

    def to_json(self) -> dict[str, Any]:
        return {"recommendation": self.recommendation.to_json(), "previous": self.previous,
                "stored": self.replaces, "why_kept": self.why_kept}


def lineup(study) -> tuple[Record, list[Record]]:
    """(default launch, the configurations to measure against it): the stored recommendation;
    when that is the default launch itself (no candidate held up, or none settled), the best
    candidates the search measured, chosen as the search chose them."""
    rec = StudyAttrs.of(study).recommendation
    if not rec or not isinstance(rec.get("config"), dict):
        raise StorageError(f"study {study.study_name!r} has no recommendation to verify (the "
                           "search was interrupted or is still running); finish `autotune "
                           "search` first")
    config = Config.from_dict(rec["config"], where="stored recommendation")
    stored = records(study)
    stored_default = next((r for r in stored if r.role == Role.DEFAULT), None)
    base = stored_default.config if stored_default is not None else Config()
    default = Record(config=base, role=Role.DEFAULT, feasible=True,
                     result=TrialResult(outcome=Outcome.OK,
                                        throughput=rec.get("default_throughput")))
    if config != base:
        return default, [Record(config=config, role="recommended", feasible=True,
                                result=TrialResult(outcome=Outcome.OK, throughput=rec.get("throughput"),
                                                   accuracy=rec.get("accuracy")))]
    candidates = pick_candidates(r for r in stored if r.role != Role.REPEAT)
    if not candidates:
        raise StorageError(f"study {study.study_name!r} recommends the default launch and has "
                           "no other configuration that ran within tolerance to measure against "
                           "it; `autotune search` with a longer --budget tries more")
    return default, candidates


def reverify(study, evaluate: Evaluate, *, rounds: int, time_left: Callable[[], float],
             progress: Progress = SILENT,
             accept: Callable[[Config], QualityVerdict] | None = None,
             max_rounds: int | None = None, quality: bool = False,
             run_length: RunLength | None = None) -> Reverified:
    """Measure the stored recommendation (or, when that is the default launch, the best stored
    candidates) against the default launch again. Speed only for the stored recommendation: its
    quality was confirmed by the search; a candidate that changes the math must pass `accept`
    (the seeded confirmation) before it is recommended. A compile is weighed against
    `run_length` (None: the one the search stored, else DEFAULT_RUN_LENGTH)."""
    default, chosen = unproven_lineup(study) if quality else lineup(study)
    stored = StudyAttrs.of(study).recommendation
    if quality:   # the unproven launch's accuracy first: a class not shown is not verified
        settled = settle_quality(study, evaluate, chosen[0].config, time_left=time_left,
                                 progress=progress)
        progress.note(f"accuracy of {chosen[0].config.key()}: {settled.claim}")
    run = run_length or RunLength.from_json(StudyAttrs.of(study).run_length_json) \
        or parse_run_length(DEFAULT_RUN_LENGTH)
    rec = verify(chosen, default, evaluate, rounds=rounds, time_left=time_left,
                 progress=progress, accept=accept, max_rounds=max_rounds,
                 weigh=Weigher.of(run, default.throughput, default.config.global_batch))
    if chosen[0].role == "recommended":
        rec = dataclasses.replace(rec, accuracy=stored.get("accuracy"),
                                  default_accuracy=stored.get("default_accuracy"))
    else:
        rec = dataclasses.replace(rec, default_accuracy=stored.get("default_accuracy"))
    measured = [v.settling for v in rec.candidates if v.settling is not None]
    previous = stored.get("headline") or ""
    if not measured:
        return Reverified(recommendation=rec, previous=previous, replaces=False,
                          why_kept="no round completed on both sides")
    rounds_done = max(s.rounds for s in measured)
    quiet = min(s.quiet_rounds for s in measured if s.rounds == rounds_done)
    if quiet * 2 <= rounds_done:
        return Reverified(recommendation=rec, previous=previous, replaces=False,
                          why_kept=f"other processes took the cores in {rounds_done - quiet}"
                                   f" of {rounds_done} rounds; run it again when the machine is quiet")
    return Reverified(recommendation=rec, previous=previous, replaces=True)


def seeded_confirmation(study, evaluate: Evaluate, *, time_left: Callable[[], float],
                        progress: Progress = SILENT) -> Callable[[Config], QualityVerdict] | None:
    """The search's seeded confirmation for a candidate that changes the math, over the quality
    evidence the study holds (None for a script, whose quality it reports itself)."""
    if StudyAttrs.of(study).script_command:
        return None
    return Confirmation(_book(study, evaluate), time_left=time_left, progress=progress).verdict


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


def unproven_lineup(study) -> tuple[Record, list[Record]]:
    """(default launch, [the fastest stored launch whose accuracy was not shown, the stored
    recommendation]): what `autotune verify --quality` settles; a recommendation stored by the
    older rule is itself judged again. Refused in one line when there is nothing to settle."""
    default, chosen = lineup_or_default(study)
    rec = StudyAttrs.of(study).recommendation or {}
    unproven = [u for u in rec.get("unproven") or () if isinstance(u.get("config"), dict)]
    if not unproven and "accuracy_claim" not in rec and chosen \
            and chosen[0].role == "recommended":
        return default, chosen[:1]   # judged by the older rule: judged again
    if not unproven:
        raise StorageError(f"study {study.study_name!r} has no faster launch whose accuracy was "
                           "not shown: its recommendation's accuracy claim stands as it is; "
                           "`autotune verify` re-measures its speed")
    u = unproven[0]
    target = Record(config=Config.from_dict(u["config"], where="stored recommendation"),
                    role="search", feasible=True,
                    result=TrialResult(outcome=Outcome.OK, throughput=(rec.get("default_throughput")
                                                                       or 0.0) * float(u.get("speedup") or 1.0)))
    return default, [target] + [c for c in chosen if c.config != target.config]


def lineup_or_default(study) -> tuple[Record, list[Record]]:
    """lineup(), or (the default launch, []) when there is nothing else to measure."""
    try:
        return lineup(study)
    except StorageError:
        stored = records(study)
        d = next((r for r in stored if r.role == Role.DEFAULT), None)
        if d is None:
            raise
        return d, []


def settle_quality(study, evaluate: Evaluate, config: Config, *, time_left: Callable[[], float],
                   progress: Progress = SILENT) -> QualityVerdict:
    """One look (quality/looks.py) at `config`'s class: a block of new seeds no run of the study
    used, its pairs planned from everything the class showed so far and fixed before the first
    runs, default and class side by side, judged on those seeds alone. Refused in one line when
    the study's looks are spent; the class's verdict unchanged when no number of seeds could show
    it (a failed or spiked seed, a drop at the tolerance or past it) or the time left holds fewer
    pairs than a look needs."""
    book = _book(study, evaluate)
    verdict = book.verdict(config)
    if verdict.status != QualityStatus.NOT_SHOWN or verdict.gate is None \
            or not showable(verdict.gate):
        return verdict
    if book.looks_spent() >= MOST_LOOKS:
        raise ConfigError(f"study {study.study_name}: its {MOST_LOOKS} looks at new seeds are "
                          "spent, so another would raise the stated 5% error rate; its accuracy "
                          "claim stands as it is")
    pair_s = (book.run_seconds(book.base) or 0.0) + (book.run_seconds(config) or 0.0)
    plan = min(plan_pairs(verdict.gate, MOST_SETTLE_PAIRS),
               int(time_left() // pair_s) if pair_s else MOST_SETTLE_PAIRS)
    if plan < LEAST_LOOK_PAIRS:
        return verdict
    first = next_block(book.classes.values()) * LOOK_SEEDS
    for seed in range(first, first + plan):
        for c in (book.base, config):
            progress.confirm_start(config=c, seed=seed)
            book.measure(c, (seed,), plan=plan if c is config else None)
        if book.evidence(config).failures():
            break
    return book.verdict(config)


def _book(study, evaluate: Evaluate) -> QualityBook:
    settings = StudyAttrs.of(study).settings   # each number bounded (study/bounded.py)
    return QualityBook(study, evaluate, batchnorm=bool(settings.get("batchnorm", True)),
                       tolerance_pp=float(settings.get("max_accuracy_drop") or 1.0),
                       seeds=tuple(range(int(settings.get("quality_seeds") or 3))),
                       most_samples=int(settings.get("quality_samples") or QUALITY_SAMPLES))
