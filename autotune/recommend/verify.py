"""Verify the best candidates against the default launch, interleaved, and recommend a winner.

A search measures each configuration once, under whatever else the machine was doing then; the
best of many single measurements is biased upwards (winner's curse). Verification re-runs the few
best and the default launch in alternating rounds (D A B C, C B A D, ...) and compares within each
round, so slow drift of the machine cancels out. Only a candidate that stays faster is recommended.
"""
from __future__ import annotations

from typing import Any, Callable

from ..result import Evaluate, Outcome, TrialResult
from ..config import Config, describe_changes
from ..progress import SILENT, Progress
from ..measure.contention import disturbed
from ..measure.stats import Stats, busy
from ..quality.verdict import QualityStatus, QualityVerdict
from ..study.records import Record, Role
from .recommendation import Recommendation, Verified
from .references import over, reference_check, reference_name
from .rounds import interleave, round_limit
from .settle import MIN_GAIN
from .weigh import Weigher, compile_cost


def verify(candidates: list[Record], default: Record, evaluate: Evaluate, *,
           rounds: int = 3, time_left: Callable[[], float] = lambda: float("inf"),
           progress: Progress = SILENT,
           accept: Callable[[Config], QualityVerdict] | None = None,
           max_rounds: int | None = None,
           keep_s: float | Callable[[], float] = 0.0,
           weigh: Weigher | None = None, spend: bool = False,
           rounds_after: Callable[[list[tuple[Config, int]]], None] | None = None
           ) -> Recommendation:
    """Interleaved rounds of default + candidates (D A B C, C B A D, ...), `rounds` of them.
    Then `accept(config)` is asked, fastest first, of the candidates that hold up (the seeded
    quality confirmation of one that changes the math, quality/confirm.py, whose verdict's `why`
    the note shows) until one is accepted; more rounds (up to `max_rounds`, default
    MAX_ROUNDS_FACTOR x rounds) then measure the default and that one alone while its ratio is
    not settled (recommend/settle.py) and the budget allows. Confirming first and then giving
    the time to the one that can win settles it sooner than rounds of all (issue 35: the first
    command's rounds of candidates its confirmation then refused left run_cpu's settings 3
    rounds, unsettled); or to a reference that ran faster than it (`_focus`). While none is
    accepted, the more rounds are of them all, leaving `keep_s` (asked before each) for a
    confirmation. With `weigh`, "fastest" is the soonest to finish the user's run, a compile
    included (recommend/weigh.py). `spend`: a settled figure goes on to more rounds while the
    time and the round limit allow (what the budget would otherwise leave). `rounds_after` is told, before each `accept`, the rounds past the asked
    ones that each candidate from the one asked on still needs to settle its ratio, as
    (configuration, rounds), so that a confirmation leaves just what the winner will need."""
    lineup = [default] + list(candidates)
    limit = round_limit(rounds, max_rounds)
    evals = interleave([(r.role, r.config) for r in lineup], evaluate, rounds=rounds,
                       time_left=time_left, progress=progress, max_rounds=rounds)
    done = len(evals[0])
    winner = _focus(_verified(lineup, evals), accept, weigh, rounds_after,
                    most_rounds=limit - done) if done else None
    focus = ([0, 1 + [r.config for r in candidates].index(winner.config)] if winner
             else list(range(len(lineup))))
    if 0 < done < limit:
        def merged(more: list[list[TrialResult]]) -> list[list[TrialResult]]:
            out = [list(evs) for evs in evals]
            for i, evs in zip(focus, more):
                out[i].extend(evs)
            return out
        more = interleave([(lineup[i].role, lineup[i].config) for i in focus], evaluate,
                          rounds=rounds, time_left=time_left, progress=progress,
                          max_rounds=limit, start=done, keep_s=0.0 if winner else keep_s,
                          round_s=_round_s(evals, [lineup[i].config for i in focus],
                                           focus, evaluate),
                          spare_rounds=1.1 if spend else 2.0,
                          enough=lambda evs: not spend and _settled_enough(
                              [v for i, v in enumerate(_verified(lineup, merged(evs)), 1)
                               if i in focus]))
        evals = merged(more)
    results: dict[int, list[float | None]] = {
        i: [ev.throughput if ev.outcome == Outcome.OK else None for ev in evs]
        for i, evs in enumerate(evals)}
    return _choose(_verified(lineup, evals), default, len(evals[0]), results, accept, weigh,
                   first=winner.config if winner else None)


def _round_s(evals: list[list[TrialResult]], configs: list[Config], focus: list[int],
             evaluate: Evaluate) -> float:
    """What one more round of the `focus` members (`configs`) will cost: the dearest of the
    asked rounds past the first where the evaluator keeps each of their launches running now
    (the first round started them, and the later ones found them running), else the dearest
    asked round. Priced with its first round's starts, a 10-minute search asked 26 s for an
    eighth round of two 3.5 s windows, and ended with its ratio a lower bound and 21 s
    unused."""
    asked = [sum(evals[i][r].seconds for i in focus) for r in range(len(evals[0]))]
    running = getattr(evaluate, "running", None)
    if len(asked) > 1 and running is not None and all(running(c) for c in configs):
        return max(asked[1:])
    return max(asked)


def _focus(verified: list[Verified], accept: Callable[[Config], QualityVerdict] | None,
           weigh: Weigher | None,
           rounds_after: Callable[[list[tuple[Config, int]]], None] | None,
           most_rounds: int) -> Verified | None:
    """The candidate the rounds past the asked ones measure beside the default launch: the first
    accepted (`_first_accepted`), or a reference that ran faster than it in the asked rounds,
    which is then the recommendation on those rounds (recommend/references.py). A 2-minute
    search gave 7 more rounds to the default compiled, which then lost to run_cpu's settings,
    recommended on their 3 rounds: a lower bound, not a figure."""
    win = _first_accepted(verified, accept, weigh, rounds_after, most_rounds=most_rounds)
    if win is None:
        return None
    return reference_check(win, verified, accept, reference_name,
                           finish=weigh.finish_s if weigh else None)[0]


def _first_accepted(verified: list[Verified],
                    accept: Callable[[Config], QualityVerdict] | None,
                    weigh: Weigher | None = None,
                    rounds_after: Callable[[list[tuple[Config, int]]], None] | None = None,
                    most_rounds: int = 0) -> Verified | None:
    """The fastest candidate that holds up and that `accept` accepts (asking it of each in
    turn, fastest first, until one is), or None; `rounds_after` told before each ask (at most
    `most_rounds` for any candidate)."""
    holding = _holding(verified, weigh)
    for i, v in enumerate(holding):
        if rounds_after is not None:
            rounds_after([(w.config, _rounds_short(w, most_rounds)) for w in holding[i:]])
        if accept is None or accept(v.config).accepted:
            return v
    return None


def _rounds_short(v: Verified, most: int) -> int:
    """Rounds past those measured that would settle `v`'s ratio at the spread measured: 0 when
    settled, `most` (the rounds left to the limit) when its rounds cannot say, never more."""
    s = v.settling
    if s is not None and s.settled:
        return 0
    need = s.rounds_to_settle() if s is not None else None
    return min(most, max(0, need - s.quiet_rounds)) if need else most


def _holding(verified: list[Verified], weigh: Weigher | None) -> list[Verified]:
    """The candidates that hold up, fastest first; with `weigh`, those that finish the run
    before the default launch, soonest first."""
    holding = [v for v in verified if v.holds]
    if weigh is not None:
        return weigh.ranked(holding)
    return sorted(holding, key=lambda v: v.ratio.median, reverse=True)


def _verified(lineup: list[Record], evals: list[list[TrialResult]]) -> list[Verified]:
    """Each candidate's completed rounds, paired with the default launch's in the same round."""
    def ok(ev: TrialResult) -> bool:
        return ev.outcome == Outcome.OK and bool(ev.throughput)

    out = []
    for rec, evs in zip(lineup[1:], evals[1:]):
        rounds = [(c, d) for c, d in zip(evs, evals[0]) if ok(c) and ok(d)]
        out.append(Verified(
            config=rec.config, role=rec.role, search_throughput=rec.throughput,
            accuracy=rec.accuracy, throughputs=tuple(c.throughput for c, _ in rounds),
            **dict(zip(("compile_s", "compile_cache"), compile_cost([rec.result, *evs]))),
            baselines=tuple(d.throughput for _, d in rounds),
            outside=tuple(max(shares) if (shares := [s for s in (c.outside_share, d.outside_share)
                                                     if s is not None]) else None
                          for c, d in rounds)))
    return out


def _settled_enough(verified: list[Verified]) -> bool:
    """More rounds would not change the answer: the leading candidate's ratio is settled, or
    even its interval's top stays under MIN_GAIN (the default launch wins)."""
    leader = max((v for v in verified if v.ratios), key=lambda v: v.ratio.median, default=None)
    if leader is None:
        return True
    s = leader.settling
    return s is not None and (s.settled or (s.interval is not None and s.interval[1] < MIN_GAIN))


def _choose(verified: list[Verified], default: Record, rounds: int,
            results: dict[int, list[float | None]],
            accept: Callable[[Config], QualityVerdict] | None = None,
            weigh: Weigher | None = None, first: Config | None = None) -> Recommendation:
    """`first`: the candidate the rounds past the asked ones measured alone, still first while
    it holds up. Its median over more rounds against the others' over the asked ones is no fair
    race: a 5-minute search gave 4 more rounds to bf16 with jemalloc, whose median then fell
    below bf16 with tcmalloc's over 3, and recommended the latter on its 3 rounds (a lower
    bound, not a figure)."""
    d_thr = [t for t in results[0] if t]
    d_med = Stats.of(d_thr).median if d_thr else default.throughput
    holding = _holding(verified, weigh)
    at = next((i for i, v in enumerate(holding) if v.config == first), None)
    if at is not None:   # ahead of the ones that would be accepted; the refused stay named
        ahead = holding[:at]
        ok = [v for v in ahead if accept is None or accept(v.config).accepted]
        holding = [v for v in ahead if v not in ok] + [holding[at]] + ok + holding[at + 1:]
    refused: list[str] = []
    unproven: list[dict[str, Any]] = []   # faster than the winner, accuracy not shown
    confirmed = ""
    if accept is not None:
        holding, confirmed = _accepted(holding, accept, refused, unproven)
    if not holding:
        best = max(verified, key=lambda v: v.ratio.median if v.ratios else 0, default=None)
        note = (f"best candidate measured {best.ratio.median:.2f}x (lower quartile "
                f"{best.ratio.q1:.2f}x) in verification; a recommendation needs {MIN_GAIN:.2f}x "
                "in the median round and more than 1x in 3 of 4 rounds"
                if best and best.ratios else "no candidate completed verification")
        if refused:
            note = "; ".join(refused)
        weighed = {"weighing": weigh.to_json(None, verified)} if weigh else {}
        return Recommendation(config=default.config, speedup=1.0, spread=0.0, rounds=rounds,
                              verified=True, accuracy=default.accuracy,
                              default_accuracy=default.accuracy, default_throughput=d_med,
                              throughput=d_med, candidates=tuple(verified), note=note,
                              default_wins=True, settling=best.settling if best else None,
                              extra={**({"unproven": unproven} if unproven else {}), **weighed})
    # never below a reference it measured: a faster one that holds up is the pick, or is named
    # (with a run length, faster is sooner to finish it)
    win, beside = reference_check(holding[0], verified, accept, reference_name,
                                  finish=weigh.finish_s if weigh else None)
    stats, settling = win.ratio, win.settling
    speedup = (settling.ratio if settling and settling.verdict.verified and settling.ratio
               else stats.median)
    return Recommendation(config=win.config, speedup=speedup, spread=stats.spread,
                          settling=settling,
                          rounds=rounds, verified=True,
                          vs_run_cpu=_over(win, verified, Role.RUN_CPU),
                          vs_default_compiled=_over(win, verified, Role.DEFAULT_COMPILED),
                          accuracy=win.accuracy, default_accuracy=default.accuracy,
                          default_throughput=d_med,
                          throughput=Stats.of(list(win.throughputs)).median,
                          candidates=tuple(verified), note="; ".join(refused),
                          extra={**({"quality": confirmed} if confirmed else {}),
                                 **({"unproven": unproven} if unproven else {}),
                                 **({"weighing": weigh.to_json(win, verified)} if weigh else {}),
                                 **({"references": beside} if beside else {})})


def _accepted(holding: list[Verified], accept: Callable[[Config], QualityVerdict],
              refused: list[str], unproven: list[dict[str, Any]]) -> tuple[list[Verified], str]:
    """([the first candidate whose quality is accepted] or [], its verdict's words), fastest
    first; each class refused on the way adds its words to `refused` once, and a faster one
    whose accuracy was not shown is named in `unproven`."""
    for v in holding:
        answer = accept(v.config)
        if answer.accepted:
            return [v], answer.why
        if answer.why not in refused:   # a class's verdict, once for all its candidates
            refused.append(answer.why)
            if answer.status in (QualityStatus.NOT_SHOWN, QualityStatus.PENDING) \
                    and v.ratio.median > 1.0:
                unproven.append({"config": v.config.to_dict(), "speedup": v.ratio.median,
                                 "changes": describe_changes(v.config, none="default"),
                                 "why": answer.why})
    return [], ""


def _over(win: Verified, verified: list[Verified], role: str) -> float | None:
    """The winner's median per-round ratio over a reference it was verified beside (1.0 when it
    is that reference; None when that reference completed no round)."""
    ref = next((v for v in verified if v.role == role), None)
    if ref is win:
        return 1.0
    return None if ref is None else over(win, ref)


def trusted_alone(r: Record) -> bool:
    """Whether one search measurement may stand without verification: not when other processes
    took its cores while it was timed (measure/contention.py; for a trial stored before that was
    measured, a cpu_share below BUSY_CPU_SHARE); verification re-measures those."""
    if r.result.outside_share is not None:
        return not disturbed(r.result.outside_share)
    return not busy(r.result.cpu_share)
