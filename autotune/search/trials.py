"""The search's trials: what a search knows (the measured configurations, the quality book, the
space with the knobs a script holds, the budget's clock) and the steps that execute one
configuration: measure it (again, when other processes took its cores), judge its quality and
record it. search/loop.py proposes what to run; this module runs it.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution

from ..config import Config
from ..measure.compile_cost import is_compile_failure
from ..measure.contention import describe_outside, disturbed
from ..measure.split import highest_ceilings, of_ceiling, ran_warm
from ..plan.feasible import ruled_out
from ..plan.placement import canonical
from ..probe.topology import Topology
from ..progress import Progress
from ..quality.evidence import QualityBook
from ..quality.verdict import QualityStatus
from ..result import Evaluate, Outcome, TrialResult
from ..study import attrs as A
from ..study.records import Record, Role, record_trial, records
from ..util.clean import one_line
from .options import Clock, SearchOptions
from .references import default_launch
from .judging import Judging
from .reserve import window_of_start, without_ceiling
from .shared import Claim, ConfigClaims, StudyLock
from .spending import Spending


class Trials(Judging, Spending):
    """One search's state and the steps that execute a configuration. Every attribute is set
    here; the steps that change one say so in their docstring."""

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
                                seeds=options.quality_seeds,
                                most_samples=options.quality_samples)
        # A "repeat" row only mirrors the measurement it reuses; on resume, the original is the
        # one that stands for the config (candidates would otherwise be reported as "repeat").
        self.known: dict[str, Record] = {self.key(r.config): r for r in records(study)
                                         if r.role != Role.REPEAT}
        self.measured = 0                 # configurations launched by this run
        self.durations: list[float] = []  # seconds of this run's successful trials
        self.windows: list[float] = []    # ... of those that were windows of a running launch
        self.starts: list[float] = []     # ... of those that started their launch
        self.estimated: list[float] = []  # ... what a window of each start's launch would cost
        # this run's compiled trials: (graph compiled, compile seconds, whether it was cold)
        self.compiled: list[tuple[tuple, float, bool]] = []
        self.costed: set[int] = set()     # host counts whose trial cost the budget note measured
        self.stop_compiling()

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

    def stop_compiling(self) -> None:
        """After a compile that failed (no working compiler, an operator inductor cannot build),
        compiled launches are not tried again: the compiler fails alike for every launch of this
        workload. The search goes on eager (changes `space`, `distributions`)."""
        failed = next((r for r in self.known.values()
                       if r.config.compile and is_compile_failure(r.reason)), None)
        if failed is None or "compile" not in self.space.knobs:
            return
        from ..script.template import freeze
        self.space, _ = freeze(self.space, ["compile"])
        self.distributions = self._distributions()
        self.progress.note(f"compile=true is not tried again: trial {failed.number} failed to "
                           f"compile ({one_line(failed.reason)[:200]})")

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
        quality was measured and contends (0: none yet, nothing to race)."""
        return max((r.throughput for r in self.known.values() if r.feasible and r.throughput
                    and r.result.quality in (QualityStatus.WITHIN, QualityStatus.NOT_SHOWN)
                    and not r.result.stopped_early),
                   default=0.0)

    def ceiling_of(self, config: Config) -> float | None:
        """The highest ceiling measured in `config`'s math class (None: none yet)."""
        return highest_ceilings((self.book.class_of(r.config), r.result.ceiling)
                                for r in self.known.values()).get(self.book.class_of(config))

    def compiled_ceiling(self, config: Config) -> bool:
        """Whether a compiled launch of `config`'s math class has had its ceiling timed."""
        cls = self.book.class_of(config)
        return any(r.config.compile and r.result.ceiling and self.book.class_of(r.config) == cls
                   for r in self.known.values())

    def leader(self) -> float:
        return max((r.throughput for r in self.known.values() if r.feasible and r.throughput),
                   default=0.0)

    # ---- one trial -----------------------------------------------------------------------------

    def evaluate_and_record(self, config: Config, role: str, trial=None) -> Record:
        """Measure `config` (unless it cannot run here), judge its quality, store it (adds to
        `known`; counts in `measured`, `durations`)."""
        reason = ruled_out(config, self.space, self.topology)
        ev = TrialResult(outcome=Outcome.INFEASIBLE, reason=reason) if reason \
            else self._measure(config, role, trial)
        if role == Role.DEFAULT and ev.outcome == Outcome.OK and ev.throughput:
            floor_s = self.warn_if_too_short(config, ev)
            self.say_budget(floor_s, now=(config.nnodes, ev.seconds))
        acc, violation, judged = None, 0.0, {}
        if ev.outcome == Outcome.OK and self.options.reported_accuracy:
            acc, violation, judged = self._judge_reported(config, role, ev)
        elif ev.outcome == Outcome.OK:
            verdict = self.judge(config, ev.throughput or 0.0)
            acc, violation, judged = verdict.mean, verdict.violation, verdict.trial_fields()
        share = of_ceiling(ev.throughput, max(self.ceiling_of(config) or 0.0, ev.ceiling or 0.0))
        rec = record_trial(self.study, config=config,
                           result=replace(ev, accuracy=acc, of_ceiling=share, **judged),
                           violation=violation, role=role, trial=trial)
        self.known[self.key(config)] = rec
        self.progress.trial_end(record=rec, seconds=ev.seconds)
        if self.costed and rec.outcome == Outcome.OK and not rec.result.stopped_early \
                and config.nnodes not in self.costed:   # the first trial on this many hosts
            self.say_budget(self.floor_left())
        if ev.overridden:
            self.hold(ev.overridden)
        if config.compile and is_compile_failure(ev.reason):
            self.stop_compiling()
        return rec

    def _measure(self, config: Config, role: str, trial) -> TrialResult:
        """One timed run (twice when other processes took its cores and time allows)."""
        self.progress.trial_start(config=config, role=role, number=len(self.known))
        # a sampled trial races the leader and may end its window early (measure/early_stop.py);
        # the references always run theirs: verification and the export compare with them
        lead = self.race_leader() if role == Role.SEARCH and self.options.early_stop else 0.0
        kw: dict[str, Any] = {"leader": lead} if lead else {}
        if self.options.ceiling:   # the class's first ceiling, or a higher one
            kw["ceiling_above"] = self.ceiling_of(config) or 0.0
            if config.compile and not self.compiled_ceiling(config):
                # a class's ceiling is its compiled one where compiling is offered (issue 59):
                # the first compiled launch of a class times it, whatever eager's ceiling was
                kw["ceiling_above"] = 0.0
        try:
            ev = self.evaluate(config, "throughput", **kw)
        except KeyboardInterrupt:
            if trial is not None:  # keep the study honest: this one did not finish
                stopped = TrialResult(outcome=Outcome.INTERRUPTED,
                                      reason="the search was interrupted during this trial")
                record_trial(self.study, config=config, result=stopped, role=role, trial=trial)
            raise
        self.measured += 1
        if ev.ok and disturbed(ev.outside_share) and self.left() >= 1.2 * ev.seconds:
            ev = self.remeasure(config, ev)
        if ev.ok and config.compile and ev.compile_s is not None:   # what compiling costs
            self.compiled.append((self.graph_of(config), ev.compile_s,
                                  ev.compile_cache == "cold"))
        if ev.ok and not ev.stopped_early:   # a whole trial's length, for the reserve
            # less its compile: paid once per launch and graph, not by the runs the reserve
            # prices (a kept compiled model, or inductor's cache, serves them; a fresh clone's
            # 10-minute search priced every run at a compile's 20 s and stopped sampling at 1:44)
            run_s = max(0.0, ev.seconds - (ev.compile_s or 0.0))
            self.durations.append(run_s)
            # the runs the reserve prices time no ceiling (search/reserve.py)
            kept_s = without_ceiling(run_s, ceiling_timed=ev.ceiling is not None,
                                     step_s=ev.step_median_s)
            # no start: a window of a running launch
            (self.windows if ran_warm(ev.fixed) else self.starts).append(kept_s)
            if not ran_warm(ev.fixed) and (w := window_of_start(kept_s, ev.fixed)):
                self.estimated.append(w)
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
