"""The search loop: references first, then sampler-proposed trials within the budget.

Evaluation and time are injected (`evaluate`, `clock`), so the same loop drives real trials and
the benchmark that replays a recorded landscape in seconds. The loop's state and the steps that
execute one configuration are search/trials.py's `Trials`; the `_Search` here adds the phases
that propose what to run, and the sampling phase's own counters are a `_Sampling` passed to its
steps.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace

import optuna

from ..config import describe_changes
from ..errors import WorkloadError
from ..plan.feasible import ruled_out
from ..probe.topology import Topology
from ..progress import SILENT, Progress
from ..quality.verdict import QualityStatus
from ..result import Evaluate, Outcome
from ..study.records import Record, Role, record_trial
from ..study.owners import claim_trial
from .budget import format_seconds
from .guide import Guide
from .options import Clock, SearchOptions, SearchResult
from .references import launchable_draw, reference_configs, unseen
from .shared import Claim, StudyLock, leave_unrun
from .trials import Trials


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

    def final(role: str) -> Record | None:   # judged on the evidence at the end (the noise
        return next((r for r in settled if r.role == role), refs.get(role))   # floor came later)
    return SearchResult(records=settled, default=final(Role.DEFAULT), book=search.book,
                        run_cpu=final(Role.RUN_CPU), stop_reason=stop_reason,
                        measured=search.measured, costs=search.run_costs(),
                        settle_rounds=search.settle_rounds())


@dataclass
class _Sampling:
    """The sampling phase's counters, carried from one trial to the next."""
    rng: random.Random
    best: float          # the fastest feasible throughput so far
    drawn: int           # start-up draws made (a resumed study counts its own)
    since_gain: int = 0  # measured trials since the last 1% gain
    repeats: int = 0     # proposals in a row that were measured already (or busy)
    unrun: int = 0       # proposals left unrun: their compile would not fit the time for trials


# Proposals left unrun for their compile before sampling stops (the sampler may keep proposing
# compiled launches; each one left unrun is a PRUNED trial in the study).
MAX_UNRUN = 3


class _Search(Trials):
    """The phases of one search: the references, the sampling, the settling of quality. What
    they propose runs through the steps of Trials."""

    def references(self) -> dict[str, Record | None]:
        """The default launch and the launcher heuristics, measured once (by any worker)."""
        refs: dict[str, Record | None] = {}
        for role, config in reference_configs(self.topology, self.base, self.space):
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
                       rejected=self.rejected, class_of=self.book.class_of)
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
        if self.left() < self.next_trial_s():
            self.progress.note(f"sampling stops with {format_seconds(self.remaining())} left: "
                               f"kept for {self.reserved().said()}; a trial costs about "
                               f"{self.next_trial_s():.0f} s")
            return "budget"
        if state.unrun >= MAX_UNRUN:
            self.progress.note(f"sampling stops with {format_seconds(self.remaining())} left: "
                               f"the sampler's last {state.unrun} proposals would compile past "
                               f"the {max(0.0, self.left()):.0f} s left for trials; kept "
                               f"for {self.reserved().said()}")
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
        compile_s, cold = self.compile_cost_s(config)
        left, trial_s = (self.left(), self.next_trial_s()) if compile_s else (0.0, 0.0)
        if compile_s and left < trial_s + compile_s:
            state.unrun += 1
            why = (f"not run: compiling it{' cold' if cold else ''} would add about "
                   f"{compile_s:.0f} s to a trial's {trial_s:.0f} s, with "
                   f"{max(0.0, left):.0f} s left for trials")
            self.progress.note(f"{describe_changes(config)}: {why}")
            leave_unrun(self.study, trial, why, Role.UNRUN)
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
                             and (r.feasible or r.result.quality == QualityStatus.PENDING)
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
                       feasible=verdict.contends)


def _fails_on_default(rec: Record) -> WorkloadError:
    """The same failure would repeat on every trial: stop now, show the cause."""
    lines = [ln.strip() for ln in rec.result.log_tail.splitlines()
             if ln.strip() and not ln.startswith("--- rank ")]
    tail = " | ".join(lines[-3:]) or rec.reason
    return WorkloadError(f"the workload fails on the default launch ({rec.outcome}: "
                         f"{rec.reason}); last log lines: {tail}")
