"""After the search: choose what to recommend. Verify the best candidates against the default
launch, or, in a search shared by several workers, wait for the worker that verifies for all."""
from __future__ import annotations

import dataclasses
import time

from ..measure.contention import DISTURBED_SHARE
from ..measure.stats import BUSY_CPU_SHARE
from ..progress import Progress
from ..config import Config, describe_changes
from ..quality.confirm import Confirmation, settle_advice
from ..quality.verdict import QualityStatus, QualityVerdict, stored_verdict
from ..result import Outcome
from ..search.shared import Workers
from ..search.budget import SETTLE_ROUNDS
from ..search.reserve import run_costs, settling_cost
from ..search.lineup import pick_candidates
from ..study.records import Role, records
from .fit import lineup_that_settles
from .references import is_reference, left_out
from .rounds import round_limit
from .recommendation import Recommendation, unverified
from .verify import trusted_alone, verify
from .weigh import RunLength, Weigher


def shared_recommendation(workers: Workers, study, result, evaluate, *, rounds: int,
                          script_mode: bool, time_left, progress: Progress,
                          max_rounds: int | None = None, run_length: RunLength | None = None):
    """(recommendation, None) when this worker verified, over every worker's measurements;
    (None, stored) when another worker verified for it, after waiting with progress."""
    shown, last_note = "", 0.0
    while True:
        what, detail = workers.turn()
        if what == "verify":
            fresh = [judged(r, result.book, script_mode) for r in records(study)
                     if r.role != Role.REPEAT]
            default = next((r for r in fresh if r.role == Role.DEFAULT), result.default)
            everyone = dataclasses.replace(result, records=fresh, default=default)
            return recommend(everyone, evaluate, rounds=rounds, max_rounds=max_rounds,
                             script_mode=script_mode, run_length=run_length,
                             time_left=time_left, progress=progress), None
        if what == "read":
            return None, detail
        if detail != shown or time.monotonic() - last_note > 30:
            progress.note(f"waiting for the shared recommendation: {detail}")
            shown, last_note = detail, time.monotonic()
        time.sleep(2.0)


def judged(r, book, script_mode: bool):
    """A stored trial with its quality judged on all the evidence now in the study (another
    worker may have measured its class since it was recorded)."""
    if book is None or script_mode or r.outcome != Outcome.OK:
        return r
    book.refresh()
    return dataclasses.replace(r, feasible=r.feasible and book.verdict(r.config).contends)


def recommend(result, evaluate, *, rounds: int, script_mode: bool, time_left, progress: Progress,
              max_rounds: int | None = None,
              run_length: RunLength | None = None) -> Recommendation | None:
    """The winner of a finished search: its best candidates verified against the default
    launch (interleaved, `rounds` rounds), a winner that changes the math confirmed with seeded
    quality runs; unverified only when no budget is left and it was measured on a quiet machine.
    With `run_length`, the winner is the soonest to finish that run, a compile included."""
    default = result.default
    if default is None or not default.throughput:
        progress.note("no recommendation: the default launch has no measurement to compare with")
        return None
    candidates = pick_candidates(result.records)
    if not candidates:
        return verify([], default, evaluate, rounds=0)
    if time_left() < 20:   # unconfirmed: only what needs no confirmation may stand
        return _unconfirmed(candidates, result, default, progress)
    limit = round_limit(rounds, max_rounds)
    # A winner that changes the math is confirmed on new seeds (a script's accuracy is judged
    # per trial), after the asked rounds and before the rounds that settle its ratio, which the
    # confirmation's length leaves time for; while none is confirmed, those rounds must not eat
    # the time a confirmation takes.
    confirm = None if script_mode else _confirmation(result, default, time_left, progress)
    # the asked rounds of the lineup that fits leave the time a confirmation takes
    keep = confirm.reserve([c.config for c in candidates]) if confirm else 0.0
    fitted = _fitted(candidates, result, default, evaluate, rounds=rounds,
                     time_s=time_left() - keep, progress=progress)
    dropped = [(c.role, c.throughput / default.throughput) for c in candidates
               if c not in fitted and is_reference(c.role) and c.throughput]
    candidates = fitted
    # a search stopped by its budget wanted more time: what a settled figure leaves goes to
    # more rounds of it (docs/how-it-works.md, "The reserve")
    spend = getattr(result, "stop_reason", "") == "budget"
    more = (f", then up to {limit} while the speedup is unsettled"
            + (" or time is left" if spend else "")) if limit > rounds else ""
    progress.note(f"verifying {len(candidates)} candidate(s) against the default launch, "
                  f"interleaved: {rounds} round(s){more}")
    rec = verify(candidates, default, evaluate, rounds=rounds, max_rounds=limit,
                 time_left=time_left, progress=progress,
                 accept=confirm.verdict if confirm else (
                     script_accept(result.records) if script_mode else None),
                 keep_s=(lambda: confirm.reserve([c.config for c in candidates])) if confirm
                 else 0.0, spend=spend, rounds_after=confirm.rounds_after if confirm else None,
                 weigh=run_length and Weigher.of(run_length, default.throughput,
                                                 default.config.global_batch))
    floor = confirm.noise_floor() if confirm else None
    if floor is not None:
        rec = dataclasses.replace(rec, extra={**rec.extra, "noise_floor": floor})
    if confirm is not None and confirm.unconfirmed:
        rec = dataclasses.replace(rec, extra={**rec.extra, "unconfirmed": confirm.unconfirmed})
    if confirm is not None:
        rec = with_unshown(rec, result, default)
    if unnamed := left_out(dropped, kept=len(candidates), speedup=rec.speedup):
        rec = dataclasses.replace(rec, extra={
            **rec.extra, "references": [*(rec.extra.get("references") or ()), *unnamed]})
    return rec


def _unconfirmed(candidates, result, default, progress: Progress) -> Recommendation | None:
    """No budget left to verify: the best candidate that needs no confirmation, measured on a
    quiet machine, unverified; None (said) when there is none."""
    alone = [c for c in candidates if trusted_alone(c) and keeps_accuracy(c, result.book)]
    if not alone:
        progress.note("no recommendation: no budget left to verify, and the best candidates "
                      "were measured while other processes took their cores (over "
                      f"{DISTURBED_SHARE:.0%}, or cpu_share below {BUSY_CPU_SHARE}); run "
                      "the same command again to verify them")
        return None
    return unverified(alone[0], default, "no budget left to verify")


def _confirmation(result, default, time_left, progress: Progress) -> Confirmation | None:
    """The seeded confirmation of a winner that changes the math, from the search's quality
    book (None without one). What it leaves for the rounds that settle the ratio after it is
    what the search kept for them: as many rounds (search/reserve.settling_rounds), at the same
    price (settling_cost: windows of the two launches kept running, starts where this search
    measured no windows; a trial's seconds without any costs)."""
    if result.book is None:
        return None
    costs = getattr(result, "costs", None) or run_costs([default.result.seconds or 0.0], [])
    kept = getattr(result, "settle_rounds", None)
    return Confirmation(
        result.book, time_left=time_left, progress=progress,
        leave_s=settling_cost(costs, SETTLE_ROUNDS if kept is None else kept).mean_s,
        rounds_cost=lambda n: settling_cost(costs, n).mean_s,
        base_launch=result.book.quickest(default.config, [
            (r.config, r.throughput) for r in result.records
            if r.outcome == Outcome.OK and r.throughput and not r.result.stopped_early]))


def keeps_accuracy(candidate, book) -> bool:
    """May `candidate` be recommended without a confirmation (no budget left for one)? Only with
    the default's math, or a script's own verdict shown within: a class shown only on the
    search's seeds was chosen on them, and is not recommended as keeping accuracy."""
    if book is None:
        return candidate.result.quality is None \
            or stored_verdict(candidate.result).status == QualityStatus.WITHIN
    return book.class_of(candidate.config) == book.class_of(book.base)


def script_accept(stored):
    """A script's recommendation rule: a configuration whose paired runs showed its accuracy
    within the tolerance, or one measured with no accuracy rule at all (a script that reports
    none); the others are named, never recommended as keeping accuracy."""
    by_key = {r.config.key(): r for r in stored}

    def accept(config: Config) -> QualityVerdict:
        r = by_key.get(config.key())
        verdict = stored_verdict(r.result) if r is not None else None
        if r is None or r.result.quality is None or verdict.status == QualityStatus.WITHIN:
            return QualityVerdict(status=QualityStatus.WITHIN, why="")
        claim = r.result.quality_verdict or verdict.label
        return QualityVerdict(status=QualityStatus.NOT_SHOWN, why=(
            f"{describe_changes(config, none='default')}: accuracy {claim}; to show it: runs of "
            "it on the default's seeds ({seed} in the script's command), which a search runs "
            "for a configuration that leads"))
    return accept


def _fitted(candidates, result, default, evaluate, *, rounds: int, time_s: float,
            progress: Progress):
    """The candidates the time left can settle (recommend/fit.py), the leader first; the cut
    said."""
    running = getattr(evaluate, "running", None)

    def up(r) -> bool:
        return bool(running and running(r.config))
    costs = getattr(result, "costs", None)
    kept = lineup_that_settles(candidates, running=up, default_running=up(default), costs=costs,
                               time_s=time_s, rounds=rounds)
    if len(kept) < len(candidates):
        progress.note(f"verifying {len(kept)} of {len(candidates)} candidates, the fastest "
                      f"first: the {time_s:.0f} s left hold {rounds} rounds of no more (a start "
                      f"~{costs.start_s:.0f} s, a window ~{costs.window_s:.0f} s); rounds "
                      "before breadth")
    return kept


def with_unshown(rec: Recommendation, result, default) -> Recommendation:
    """`rec` naming, besides the faster candidates its confirmation could not show, the fastest
    class the search measured faster than the winner whose accuracy was not shown there (its
    drop past the tolerance on the search's seeds, so never a candidate): its speed in the
    search, its verdict, and whether more seeds could show it."""
    book = result.book
    named = {book.class_of(Config.from_dict(u["config"])) for u in rec.extra.get("unproven") or ()}
    named.add(book.class_of(rec.config))    # never its own recommendation among the not shown
    faster = sorted((r for r in result.records if r.outcome == Outcome.OK and r.throughput
                     and r.throughput / default.throughput > rec.speedup
                     and not r.result.stopped_early
                     and r.result.quality == QualityStatus.NOT_SHOWN),
                    key=lambda r: r.throughput, reverse=True)
    for r in faster:
        cls = book.class_of(r.config)
        verdict = book.verdict(r.config)
        if cls in named or verdict.gate is None:
            continue
        settle = settle_advice(book, verdict)
        unshown = {"config": r.config.to_dict(), "speedup": r.throughput / default.throughput,
                   "changes": describe_changes(r.config, none="default"), "in_search": True,
                   "why": f"accuracy on the search's seeds: {verdict.claim}{settle}"}
        return dataclasses.replace(rec, extra={**rec.extra, "unproven": [
            *(rec.extra.get("unproven") or []), unshown]})
    return rec
