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
from ..measure.contention import describe_outside, disturbed
from ..plan.feasible import ruled_out
from ..plan.placement import canonical
from ..probe.topology import Topology
from ..progress import Progress
from ..quality.confirm import confirmation_cost
from ..quality.evidence import QualityBook
from ..quality.script_floor import judge_reported, measure_script_floor, stored_script_floor
from ..quality.verdict import QualityStatus, QualityVerdict
from ..result import Evaluate, Outcome, TrialResult
from ..study import attrs as A
from ..study.records import Record, Role, record_trial, records
from .budget import Reserve, budget_note, phase_costs, too_short, trial_costs, verify_reserve
from .lineup import pick_candidates
from .options import Clock, SearchOptions
from .references import default_launch
from .shared import Claim, ConfigClaims, StudyLock


class Trials:
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
                                seeds=options.quality_seeds)
        # A "repeat" row only mirrors the measurement it reuses; on resume, the original is the
        # one that stands for the config (candidates would otherwise be reported as "repeat").
        self.known: dict[str, Record] = {self.key(r.config): r for r in records(study)
                                         if r.role != Role.REPEAT}
        self.measured = 0                 # configurations launched by this run
        self.durations: list[float] = []  # seconds of this run's successful trials
        self.costed: set[int] = set()     # host counts whose trial cost the budget note measured

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
        return self.reserved().total_s

    def reserved(self) -> Reserve:
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
            floor_s = self.warn_if_too_short(config, ev)
            self.say_budget(floor_s, now=(config.nnodes, ev.seconds))
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
        if self.costed and rec.outcome == Outcome.OK and not rec.result.stopped_early \
                and config.nnodes not in self.costed:   # the first trial on this many hosts
            self.say_budget(self.floor_left())
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

    def warn_if_too_short(self, config: Config, ev: TrialResult) -> float:
        """Said once, from the first trial's cost, before the noise floor spends the budget.
        Returns what the noise floor will cost (seconds)."""
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
        return costs.noise_floor_s

    def say_budget(self, floor_s: float, now: tuple[int, float] | None = None) -> None:
        """How many trials the budget buys, per number of hosts (search/budget.py): said at the
        default launch, before the noise floor, and again when a trial first spans a number of
        hosts not measured yet. `now`: (hosts, seconds) of a trial not stored yet."""
        seen: dict[int, list[float]] = {}
        for r in self.known.values():
            if r.outcome == Outcome.OK and r.result.seconds and not r.result.stopped_early:
                seen.setdefault(r.config.nnodes, []).append(r.result.seconds)
        if now is not None:
            seen.setdefault(now[0], []).append(now[1])
        costs = trial_costs(seen, max(self.space.knobs.get("nnodes", (1,))))
        self.costed = {k for k, (_, measured) in costs.items() if measured}
        kept = self.reserved()
        self.progress.note(budget_note(self.left() - floor_s, costs, floor_s=floor_s,
                                       verify_s=kept.total_s, confirm_s=kept.confirm_s))

    def floor_left(self) -> float:
        """What the default launch's seeded quality runs still cost (0: measured, or a script's,
        which the default trial measured itself)."""
        rec = self.known.get(self.key(self.base))
        if self.options.reported_accuracy or rec is None or not rec.throughput:
            return 0.0
        return self.quality_cost(self.base, rec.throughput)

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
            if book.missing_seeds(base):   # the noise floor is the default launch's class's
                book.measure(self.fastest_of_class(base, (config, throughput)),
                             progress=self.progress)
            if not is_base:
                book.measure(config, progress=self.progress)
        return book.verdict(config)

    def fastest_of_class(self, config: Config, now: tuple[Config, float]) -> Config:
        """The quickest measured launch of `config`'s class (`now`: one being judged, not stored
        yet), which runs that class's seeded quality runs (QualityBook.quickest)."""
        seen = [(r.config, r.throughput) for r in self.known.values()
                if r.outcome == Outcome.OK and r.throughput]
        return self.book.quickest(config, seen + [now])

    def rejected(self, config: Config) -> bool:
        """A class the quality gate rejected is no place to look (script mode: the script's
        number, judged per trial)."""
        return not self.options.reported_accuracy and self.book.verdict(config).violation > 0
