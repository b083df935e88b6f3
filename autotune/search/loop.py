"""The search loop: references first, then sampler-proposed trials within the budget.

Evaluation and time are injected (`evaluate`, `clock`), so the same loop drives real trials and
the benchmark that replays a recorded landscape in seconds. The loop's state is a `_Search`
(what is measured, the quality book, the space with the knobs a script holds) whose methods are
the steps; the sampling phase's own counters are a `_Sampling` passed to its steps.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution

from ..config import Config
from ..errors import WorkloadError
from ..progress import SILENT, Progress
from ..measure.contention import describe_outside, disturbed
from ..plan.placement import canonical
from ..plan.feasible import ruled_out
from ..probe.topology import Topology
from ..quality.confirm import confirmation_cost
from ..quality.evidence import QualityBook
from ..quality.script_floor import judge_reported, measure_script_floor, stored_script_floor
from ..quality.verdict import QualityStatus, QualityVerdict
from ..result import Evaluate, Outcome, TrialResult
from ..study import attrs as A
from ..study.records import Record, Role, record_trial, records
from ..study.owners import claim_trial
from .budget import phase_costs, too_short, verify_reserve
from .options import Clock, SearchOptions, SearchResult
from .guide import Guide
from .lineup import pick_candidates
from .references import default_launch, launchable_draw, reference_configs, unseen
from .shared import Claim, ConfigClaims, StudyLock


def run_search(study: optuna.Study, *, space, topology: Topology, evaluate: Evaluate,
               clock: Clock, options: SearchOptions,
               progress: Progress = SILENT, lock: StudyLock | None = None, deadline: float | None = None) -> SearchResult:
    """With `lock` (a search shared with other workers on this study), each configuration is
    claimed through the study before it runs, so no worker measures what another did or does."""
    search = _Search(study, space=space, topology=topology, evaluate=evaluate, clock=clock,
                     options=options, progress=progress, lock=lock, deadline=deadline)
    # 1. References: what the user gets without tuning, and the best-known launcher heuristic.
    refs = search.references()
    # 2. Sampler-proposed trials until the budget (less verification), stagnation or exhaustion.
    stop_reason = search.sample()
    # 3. Settle: the fastest configurations whose class is still pending get their quality
    # measured while time allows (a class rejected late can promote one that never led).
    settled = search.settle()
    return SearchResult(records=settled, default=refs.get(Role.DEFAULT), book=search.book,
                        run_cpu=refs.get(Role.RUN_CPU), stop_reason=stop_reason,
                        measured=search.measured)


@dataclass
class _Sampling:
    """The sampling phase's counters, carried from one trial to the next."""
    rng: random.Random
    best: float          # the fastest feasible throughput so far
    drawn: int           # start-up draws made (a resumed study counts its own)
    since_gain: int = 0  # measured trials since the last 1% gain
    repeats: int = 0     # proposals in a row that were measured already (or busy)


class _Search:
    """One search's state and its steps. Every attribute is set here; the steps that change
    one say so in their docstring."""

    def __init__(self, study: optuna.Study, *, space, topology: Topology, evaluate: Evaluate,
                 clock: Clock, options: SearchOptions, progress: Progress,
                 lock: StudyLock | None, deadline: float | None) -> None:
        self.study, self.topology, self.evaluate = study, topology, evaluate
        self.clock, self.options, self.progress = clock, options, progress
        self.base = default_launch(space, topology)
        self.space = space
        self.distributions = self._distributions()
        # Knobs a user's script overrides (seen from outside on a trial, or named by the static
        # scan): held at the default from then on, on resume too, and remembered for the export.
        self.overrides: dict[str, str] = A.StudyAttrs.of(study).script_overrides
        self.hold({**options.overridden, **self.overrides})
        self.claims = ConfigClaims(study, lock, self.key, deadline=deadline) \
            if lock is not None else None
        # The end of this search's budget, on every trial it claims: a search on another
        # machine may then fail a trial this one left RUNNING when killed (never before).
        self.deadline = deadline if deadline is not None else \
            time.time() + max(0.0, options.budget_s - clock.elapsed())
        # shared: each (math class, seed) is claimed, so workers never run the same quality run
        self.book = QualityBook(study, evaluate, batchnorm=options.batchnorm, base=self.base,
                                claims=self.claims, tolerance_pp=options.max_accuracy_drop,
                                seeds=options.quality_seeds)
        # A "repeat" row only mirrors the measurement it reuses; on resume, the original is the
        # one that stands for the config (candidates would otherwise be reported as "repeat").
        self.known: dict[str, Record] = {self.key(r.config): r for r in records(study)
                                         if r.role != Role.REPEAT}
        self.measured = 0                 # configurations launched by this run
        self.durations: list[float] = []  # seconds of this run's successful trials

    # ---- configurations and the space ----------------------------------------------------------

    def key(self, config: Config) -> str:  # two spellings of one launch are one configuration
        return canonical(config, self.topology).key()

    def _distributions(self) -> dict[str, CategoricalDistribution]:
        return {k: CategoricalDistribution(list(v)) for k, v in self.space.knobs.items()}

    def hold(self, found: dict[str, str]) -> None:
        """Freeze the knobs a script overrides (changes `space`, `distributions`, `overrides`)."""
        from ..script.template import freeze
        new = {k: v for k, v in found.items() if k not in self.overrides}
        if new:
            self.overrides.update(new)
            A.write_script_overrides(self.study, self.overrides)
        self.space, held = freeze(self.space, list(found))
        self.distributions = self._distributions()
        for knob in held:
            self.progress.knob_held(knob=knob, why=self.overrides[knob])

    def take(self, config: Config, trial) -> tuple[Claim, Record | None, optuna.Trial | None]:
        """(MINE, None, trial) to run it; (DONE, record, None) when measured (by any worker);
        (BUSY, None, None) while another worker measures it."""
        seen = self.known.get(self.key(config))
        if seen is not None:
            return Claim.DONE, seen, None
        if self.claims is None:
            return Claim.MINE, None, trial() if callable(trial) else trial
        state, rec, trial = self.claims.claim(config, trial)
        if rec is not None and rec.role != Role.REPEAT:
            self.known[self.key(rec.config)] = rec
        return state, rec, trial

    def race_leader(self) -> float:
        """What a sampled trial must be able to reach: the fastest whole measurement whose
        quality is accepted (0: none yet, nothing to race)."""
        return max((r.throughput for r in self.known.values() if r.feasible and r.throughput
                    and r.result.quality == QualityStatus.ACCEPTED and not r.result.stopped_early),
                   default=0.0)

    def leader(self) -> float:
        return max((r.throughput for r in self.known.values() if r.feasible and r.throughput),
                   default=0.0)

    # ---- time ----------------------------------------------------------------------------------

    def reserve(self) -> float:
        """What verification and a confirmation will need (budget.verify_reserve), from the
        trials measured so far: the default launch and today's candidates (search/lineup.py),
        and the accepted leader's seeded confirmation (quality/confirm.py)."""
        o = self.options
        lead = max((r for r in self.known.values() if r.feasible and r.throughput
                    and r.result.quality == QualityStatus.ACCEPTED),
                   key=lambda r: r.throughput, default=None)
        return verify_reserve(durations=self.durations, lineup=1 + len(pick_candidates(
                                  self.known.values(), n=o.verify_configs - 1)),
                              confirm_s=confirmation_cost(self.book, lead.config if lead else None),
                              rounds=o.verify_rounds, floor_s=o.verify_reserve_s,
                              budget_s=o.budget_s)

    def left(self) -> float:
        return self.options.budget_s - self.clock.elapsed() - self.reserve()

    def quality_cost(self, config: Config, throughput: float) -> float:
        return self.book.cost(config, throughput, self.options.quality_samples)

    # ---- one trial -----------------------------------------------------------------------------

    def evaluate_and_record(self, config: Config, role: str, trial=None) -> Record:
        """Measure `config` (unless it cannot run here), judge its quality, store it (adds to
        `known`; counts in `measured`, `durations`)."""
        reason = ruled_out(config, self.space, self.topology)
        ev = TrialResult(outcome=Outcome.INFEASIBLE, reason=reason) if reason \
            else self._measure(config, role, trial)
        if role == Role.DEFAULT and ev.outcome == Outcome.OK and ev.throughput:
            self.warn_if_too_short(config, ev)
        acc, violation, judged = None, 0.0, {}
        if ev.outcome == Outcome.OK and self.options.reported_accuracy:
            acc, violation, judged = self._judge_reported(config, role, ev)
        elif ev.outcome == Outcome.OK:
            verdict = self.judge(config, ev.throughput or 0.0)
            acc, violation, judged = verdict.mean, verdict.violation, verdict.trial_fields()
        rec = record_trial(self.study, config=config, result=replace(ev, accuracy=acc, **judged),
                           violation=violation, role=role, trial=trial)
        self.known[self.key(config)] = rec
        self.progress.trial_end(record=rec, seconds=ev.seconds)
        if ev.overridden:
            self.hold(ev.overridden)
        return rec

    def _measure(self, config: Config, role: str, trial) -> TrialResult:
        """One timed run (twice when other processes took its cores and time allows)."""
        self.progress.trial_start(config=config, role=role, number=len(self.known))
        # a sampled trial races the leader and may end its window early (measure/early_stop.py);
        # the references always run theirs: verification and the export compare with them
        lead = self.race_leader() if role == Role.SEARCH and self.options.early_stop else 0.0
        try:
            ev = self.evaluate(config, "throughput", **({"leader": lead} if lead else {}))
        except KeyboardInterrupt:
            if trial is not None:  # keep the study honest: this one did not finish
                stopped = TrialResult(outcome=Outcome.INTERRUPTED,
                                      reason="the search was interrupted during this trial")
                record_trial(self.study, config=config, result=stopped, role=role, trial=trial)
            raise
        self.measured += 1
        if ev.ok and disturbed(ev.outside_share) and self.left() >= 1.2 * ev.seconds:
            ev = self.remeasure(config, ev)
        if ev.ok and not ev.stopped_early:   # a whole trial's length, for the reserve
            self.durations.append(ev.seconds)
        return ev

    def remeasure(self, config: Config, first: TrialResult) -> TrialResult:
        """Once more, for a trial whose cores other processes took: the less disturbed of the
        two stands, and its note says so (a still-disturbed one stays marked by its share)."""
        # (one trial measured twice: it counts once in trials_run and against --max-trials)
        self.progress.note(f"re-measuring: {describe_outside(first.outside_share or 0.0)} "
                           "while it was timed")
        second = self.evaluate(config, "throughput")
        keep, other = second, first
        if not second.ok or (second.outside_share or 0.0) > (first.outside_share or 0.0):
            keep, other = first, second
        share = other.outside_share
        why = ("measured twice; " + (f"in the other run {describe_outside(share)}"
                                      if share is not None else f"the other run: {other.outcome}"))
        return replace(keep, note="; ".join(n for n in (keep.note, why) if n))

    def warn_if_too_short(self, config: Config, ev: TrialResult) -> None:
        """Said once, from the first trial's cost, before the noise floor spends the budget."""
        o = self.options
        if o.reported_accuracy:
            runs = max(0, len(o.script_seeds) - 1) \
                if stored_script_floor(A.StudyAttrs.of(self.study)) is None else 0
            per_run = ev.seconds
        else:
            runs = len(self.book.missing_seeds(config))
            per_run = self.quality_cost(config, ev.throughput or 0.0) / max(runs, 1)
        costs = phase_costs(spent_s=self.clock.elapsed(), trial_s=ev.seconds,
                            quality_run_s=per_run, quality_runs=runs,
                            verify_rounds=o.verify_rounds)
        message = too_short(costs, o.budget_s)
        if message:
            self.progress.warn(f"warning: {message}. Going on: what is measured is kept, and "
                               "the same command with a longer --budget resumes it")

    # ---- quality ---------------------------------------------------------------------------------

    def _judge_reported(self, config: Config, role: str,
                        ev: TrialResult) -> tuple[float | None, float, dict[str, Any]]:
        """Script mode: the accuracy the script reported, gated against the default launch's
        seeds when it has them (the default launch measures them). Returns (accuracy,
        violation, the TrialResult fields)."""
        o = self.options
        if role == Role.DEFAULT:
            floor = measure_script_floor(self.study, self.evaluate, config, ev, o.script_seeds,
                                         time_left=self.left, progress=self.progress)
            return ev.accuracy, 0.0, ({"quality_sd": floor.sd, "quality_n": floor.n}
                                      if floor is not None else {})
        base = self.known.get(self.key(self.base))
        floor = stored_script_floor(A.StudyAttrs.of(self.study))
        violation, judged = judge_reported(ev.accuracy, floor,
                                           base_accuracy=base.accuracy if base else None,
                                           max_drop_pp=o.max_accuracy_drop,
                                           required=o.accuracy_required)
        return ev.accuracy, violation, judged

    def judge(self, config: Config, throughput: float) -> QualityVerdict:
        """Quality of `config`'s math class: measured now when it is the default's class (the
        noise floor) or a contender for the lead, else left pending until it matters."""
        book, base = self.book, self.base
        is_base = book.class_of(config) == book.class_of(base)
        contender = throughput >= 0.97 * self.leader()
        if book.missing_seeds(config) and (is_base or contender) \
                and self.quality_cost(config, throughput) <= max(0.0, self.left()):
            if book.missing_seeds(base):   # the noise floor is the default launch's own
                book.measure(base, progress=self.progress)
            if not is_base:
                book.measure(config, progress=self.progress)
        return book.verdict(config)

    def rejected(self, config: Config) -> bool:
        """A class the quality gate rejected is no place to look (script mode: the script's
        number, judged per trial)."""
        return not self.options.reported_accuracy and self.book.verdict(config).violation > 0

    # ---- the phases ------------------------------------------------------------------------------

    def references(self) -> dict[str, Record | None]:
        """The default launch and the launcher heuristics, measured once (by any worker)."""
        refs: dict[str, Record | None] = {}
        for role, config in reference_configs(self.topology, self.base):
            rec = self.known.get(self.key(config))
            state, trial = Claim.DONE, None
            if rec is None and self.left() > 0:
                # shared: a RUNNING trial carries the claim; alone: stored when done, as before
                state, rec, trial = self.take(config, self.study.ask if self.claims else None)
                if state == Claim.BUSY:
                    self.progress.note(f"{role}: another worker is measuring it")
            if state == Claim.MINE:
                rec = self.evaluate_and_record(config, role, trial=trial)
                if role == Role.DEFAULT and rec.outcome in (Outcome.WORKLOAD_ERROR, Outcome.CRASH):
                    raise _fails_on_default(rec)
            refs[role] = rec
        return refs

    def sample(self) -> str:
        """Sampler-proposed trials until a stop; returns why it stopped."""
        state = _Sampling(
            rng=random.Random(self.options.seed), best=self.leader(),
            drawn=sum(r.role == Role.SEARCH for r in self.known.values()))
        guided = Guide(self.options.guide, self.topology, self.key, ruled_out,
                       rejected=self.rejected)
        while True:
            stop = self._stop_reason(state)
            if stop is None and state.repeats >= 3:
                stop = self._explore(state)
            if stop is not None:
                return stop
            self._propose(state, guided)
            self._sample_one(state)

    def _stop_reason(self, state: _Sampling) -> str | None:
        o = self.options
        if self.left() < o.min_trial_s:
            return "budget"
        if o.max_trials is not None and self.measured >= o.max_trials:
            return "max_trials"
        if state.since_gain >= o.patience and \
                self.clock.elapsed() >= o.stagnation_after * o.budget_s:
            return "stagnated"
        return None

    def _explore(self, state: _Sampling) -> str | None:
        """The sampler keeps proposing measured configs: enqueue an unseen one instead
        ("exhausted" when none is left; resets `state.repeats`)."""
        taken = {**self.known, **dict.fromkeys(self.claims.busy_keys())} if self.claims \
            else self.known
        fresh = unseen(self.space, taken, state.rng, self.key)
        if fresh is None:
            return "exhausted"
        self.study.enqueue_trial(fresh)
        state.repeats = 0
        return None

    def _propose(self, state: _Sampling, guided: Guide) -> None:
        """Enqueue the guide's proposal, else (during TPE's start-up) a launchable draw."""
        # shared: what other workers are measuring counts as measured
        proposal = guided.next(self.space, self.known,
                               self.claims.busy_keys() if self.claims else ())
        if proposal is not None:
            self.study.enqueue_trial(proposal)
        elif state.drawn < self.options.startup_draws:  # drawn from what can run here
            space = self.space
            draw = launchable_draw(space, state.rng,
                                   lambda p: self.key(space.to_config(p)) in self.known,
                                   lambda p: ruled_out(space.to_config(p), space, self.topology))
            # none left: stop drawing
            state.drawn = state.drawn + 1 if draw is not None else self.options.startup_draws
            if draw is not None:
                self.study.enqueue_trial(draw)

    def _sample_one(self, state: _Sampling) -> None:
        """Ask the sampler for a trial and measure it, unless measured (a repeat) or busy."""
        trial = self.study.ask(self.distributions)
        claim_trial(self.study, trial, deadline=self.deadline)
        config = self.space.to_config(trial.params)
        taken, seen, _ = self.take(config, trial)
        if taken == Claim.BUSY:
            state.repeats += 1
            self.claims.release(trial, "another worker is measuring this configuration")
            return
        if seen is not None:
            # Never run a configuration twice: tell the sampler what it already measured.
            state.repeats += 1
            # the measurement it reuses, whole (a script's metric too), and where it came from
            mirror = replace(seen.result, accuracy=seen.accuracy, reused_from=seen.number)
            record_trial(self.study, config=config, result=mirror,
                         violation=0.0 if seen.feasible else 1.0, role=Role.REPEAT, trial=trial)
            return
        state.repeats = 0
        rec = self.evaluate_and_record(config, Role.SEARCH, trial=trial)
        if rec.outcome != Outcome.INFEASIBLE:
            state.since_gain += 1
        if rec.feasible and rec.throughput and rec.throughput > state.best * 1.01:
            state.best, state.since_gain = rec.throughput, 0

    def settle(self, top: int = 3) -> list[Record]:
        """Records with their final quality; pending ones among the top `top` measured if time
        allows, and any still pending afterwards are not recommendable."""
        while True:
            recs = [self._refreshed(r) for r in self.known.values()]
            ranked = sorted((r for r in recs if r.outcome == Outcome.OK and r.throughput
                             and r.result.quality in (QualityStatus.ACCEPTED, QualityStatus.PENDING)
                             and not r.result.stopped_early),
                            key=lambda r: r.throughput, reverse=True)[:top]
            pending = [r for r in ranked if r.result.quality == QualityStatus.PENDING]
            todo = next((r for r in pending
                         if self.quality_cost(r.config, r.throughput) <= self.left()), None)
            if todo is None:
                return recs
            self.book.measure(todo.config, progress=self.progress)

    def _refreshed(self, r: Record) -> Record:
        """`r` judged on the quality evidence stored now."""
        if r.outcome != Outcome.OK or r.result.metric_source:
            return r
        verdict = self.book.verdict(r.config)
        return replace(r, result=replace(r.result, accuracy=verdict.mean,
                                         **verdict.trial_fields()),
                       feasible=verdict.violation <= 0 and verdict.status != QualityStatus.PENDING)


def _fails_on_default(rec: Record) -> WorkloadError:
    """The same failure would repeat on every trial: stop now, show the cause."""
    lines = [ln.strip() for ln in rec.result.log_tail.splitlines()
             if ln.strip() and not ln.startswith("--- rank ")]
    tail = " | ".join(lines[-3:]) or rec.reason
    return WorkloadError(f"the workload fails on the default launch ({rec.outcome}: "
                         f"{rec.reason}); last log lines: {tail}")
