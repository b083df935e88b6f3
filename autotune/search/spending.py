"""The search's clock and budget, as steps of its Trials (search/trials.py): what verification and
a confirmation will need, what is left for trials, what a quality run costs, and the budget
notes and warnings said along the way (the arithmetic is search/budget.py's)."""
from __future__ import annotations

import statistics

from ..config import Config
from ..measure.compile_cost import graph_key
from ..plan.placement import canonical
from ..quality.confirm import confirmation_cost, look_pairs
from ..quality.script_floor import stored_script_floor
from ..quality.sizing import MIN_QUALITY_SAMPLES, sized_samples, too_short_for_quality
from ..quality.verdict import QualityStatus
from ..result import Outcome, TrialResult
from ..study import attrs as A
from ..study.records import Role
from .budget import (SETTLE_ROUNDS, Reserve, budget_note, phase_costs, too_short, trial_costs,
                     verify_reserve)
from .reserve import RunCosts, run_costs, settling_rounds
from .lineup import pick_candidates


class Spending:
    """Mixed into Trials: every attribute it reads is set by Trials.__init__."""

    def reserve(self) -> float:
        return self.reserved().total_s

    def reserved(self) -> Reserve:
        """What verification and a confirmation will need (budget.verify_reserve), from the
        runs measured so far: a start or a window each, as this search measured them
        (search/reserve.py); the lineup is the default launch and today's candidates
        (search/lineup.py), each a window when its launch is running now (the evaluator's
        `running`, where it keeps launches), and the contending leader's seeded confirmation
        (quality/confirm.py), a least look and the look its screening plans."""
        o = self.options
        lead = max((r for r in self.known.values() if r.feasible and r.throughput
                    and r.result.quality in (QualityStatus.WITHIN, QualityStatus.NOT_SHOWN)),
                   key=lambda r: r.throughput, default=None)
        lineup = [self.base] + [r.config for r in pick_candidates(
            self.known.values(), n=o.verify_configs - 1)]
        running = getattr(self.evaluate, "running", None)
        led = lead.config if lead else None
        return verify_reserve(costs=self.run_costs(),
                              running=[bool(running and running(c)) for c in lineup],
                              confirm_s=confirmation_cost(self.book, led),
                              planned_s=confirmation_cost(self.book, led, look_pairs(
                                  self.book, led)) if led is not None else 0.0,
                              rounds=o.verify_rounds, floor_s=o.verify_reserve_s,
                              budget_s=o.budget_s,
                              sampled=any(r.role == Role.SEARCH for r in self.known.values()))

    def settle_rounds(self) -> int | None:
        """The rounds kept to settle the winner's ratio, at this search's costs and budget (None
        before any run: nothing to price them with)."""
        costs = self.run_costs()
        return None if costs is None else settling_rounds(costs, self.options.budget_s,
                                                          SETTLE_ROUNDS)

    def run_costs(self) -> RunCosts | None:
        """What a start and a window cost in this search so far (None before any trial)."""
        return run_costs(self.starts, self.windows, self.estimated)

    def next_trial_s(self) -> float:
        """What the next sampled trial is expected to cost: the median of this search's trials
        (windows and starts as they came), the plan's least trial before any."""
        if not self.durations:
            return self.options.min_trial_s
        return sorted(self.durations)[len(self.durations) // 2]

    def compile_cost_s(self, config: Config) -> tuple[float, bool]:
        """(seconds, cold) that compiling `config` adds to its trial: the median compile of this
        search's compiled trials; where `config` compiles a graph no trial of it has (measure/
        compile_cost.graph_key) and a compile was seen cold, the dearer of that and the median
        cold one (cold: True); (0, False) when it does not compile, or before any compile was
        measured. A sampled launch compiles in its trial even from a warm cache (a kept launch
        compiles anew for another configuration: worker/compiled.py): 7-14 s each on the 2-core
        EPYC. The trials' own median leaves compiles out (the runs the reserve prices do not pay
        them), so a compiled trial sampled last overran the time for trials by its compile: a
        5-minute search's last trial took 22 s against the 7 s expected, and the leader's
        confirmation no longer fitted (issue 62)."""
        if not config.compile or not self.compiled:
            return 0.0, False
        seconds = statistics.median(s for _, s, _ in self.compiled)
        cold = [s for _, s, was_cold in self.compiled if was_cold]
        if cold and self.graph_of(config) not in {g for g, _, _ in self.compiled}:
            return max(seconds, statistics.median(cold)), True
        return seconds, False

    def graph_of(self, config: Config) -> tuple:
        """The compiled graph `config` runs, as this machine places it (graph_key of the
        canonical launch: automatic threads resolved as the plan runs them)."""
        return graph_key(canonical(config, self.topology))

    def remaining(self) -> float:
        """The budget not yet spent, the reserve included."""
        return self.options.budget_s - self.clock.elapsed()

    def left(self) -> float:
        """What is left for trials: the budget not spent, less the reserve."""
        return self.remaining() - self.reserve()

    def quality_cost(self, config: Config, throughput: float) -> float:
        return self.book.cost(config, throughput, self.planned_length(throughput))

    def planned_length(self, throughput: float) -> int:
        """The samples of a quality run: the study's, else what sizing would give at
        `throughput` (the quickest launch of the default's math), else the fixed length."""
        o = self.options
        if self.book.length:
            return self.book.length
        if o.size_quality and throughput:
            return sized_samples(throughput=throughput, budget_s=o.budget_s,
                                 most=o.quality_samples)
        return o.quality_samples


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
        if o.size_quality and ev.throughput:   # not even the shortest useful quality run fits
            message = too_short_for_quality(min(MIN_QUALITY_SAMPLES, o.quality_samples),
                                            ev.throughput, o.budget_s) or message
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
