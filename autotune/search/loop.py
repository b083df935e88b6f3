"""The search loop: references first, then sampler-proposed trials within the budget.

Evaluation and time are injected (`evaluate`, `clock`), so the same loop drives real trials and
the benchmark that replays a recorded landscape in seconds.
"""
from __future__ import annotations

import random
from dataclasses import replace
from typing import Any, Callable

import optuna
from optuna.distributions import CategoricalDistribution

from ..config import Config
from ..errors import WorkloadError
from ..measure.contention import describe_outside, disturbed
from ..measure.quality import Sample, single_run_gate
from ..plan.placement import canonical
from ..plan.feasible import ruled_out
from ..probe.topology import Topology
from ..run import outcome as R
from ..run.outcome import Evaluate, TrialResult
from ..study import attrs as A
from ..study.evidence import CONFIRM_SEEDS, QualityBook
from ..study.records import (DEFAULT_ROLE, REPEAT_ROLE, RUN_CPU_ROLE, SEARCH_ROLE, Record,
                             record_trial, records)
from ..study.owners import claim_trial
from .budget import phase_costs, too_short
from .options import Clock, SearchOptions, SearchResult
from .guide import Descent, first_guess, params_of
from .references import default_launch, launchable_draw, reference_configs, unseen
from .shared import ConfigClaims, StudyLock


def run_search(study: optuna.Study, *, space, topology: Topology, evaluate: Evaluate,
               clock: Clock, options: SearchOptions,
               on_event: Callable[..., None] = lambda kind, **info: None,
               lock: StudyLock | None = None, deadline: float | None = None) -> SearchResult:
    """With `lock` (a search shared with other workers on this study), each configuration is
    claimed through the study before it runs, so no worker measures what another did or does."""
    base = default_launch(space, topology)
    # Knobs a user's script overrides (seen from outside on a trial, or named by the static scan):
    # held at the default from then on, on resume too, and remembered for the export.
    overrides: dict[str, str] = A.StudyAttrs.of(study).script_overrides

    def hold(found: dict[str, str]) -> None:
        nonlocal space, distributions
        from ..measure.script import freeze
        new = {k: v for k, v in found.items() if k not in overrides}
        if new:
            overrides.update(new)
            A.write_script_overrides(study, overrides)
        space, held = freeze(space, list(found))
        distributions = {k: CategoricalDistribution(list(v)) for k, v in space.knobs.items()}
        for knob in held:
            on_event("knob_held", knob=knob, why=overrides[knob])

    distributions = {k: CategoricalDistribution(list(v)) for k, v in space.knobs.items()}
    hold({**options.overridden, **overrides})

    def key(config: Config) -> str:  # two spellings of one launch are one configuration
        return canonical(config, topology).key()

    claims = ConfigClaims(study, lock, key, deadline=deadline) if lock is not None else None
    # shared: each (math class, seed) is claimed, so workers never run the same quality run
    book = QualityBook(study, evaluate, batchnorm=options.batchnorm, base=base, claims=claims,
                       tolerance_pp=options.max_accuracy_drop, seeds=options.quality_seeds)

    def take(config: Config, trial) -> tuple[str, Record | None, optuna.Trial | None]:
        """('mine', None, trial) to run it; ('done', record, None) when measured (by any
        worker); ('busy', None, None) while another worker measures it."""
        seen = known.get(key(config))
        if seen is not None:
            return "done", seen, None
        if claims is None:
            return "mine", None, trial() if callable(trial) else trial
        state, rec, trial = claims.claim(config, trial)
        if rec is not None and rec.role != REPEAT_ROLE:
            known[key(rec.config)] = rec
        return state, rec, trial

    # A "repeat" row only mirrors the measurement it reuses; on resume, the original is the one
    # that stands for the config (candidates would otherwise be reported as role "repeat").
    known = {key(r.config): r for r in records(study) if r.role != REPEAT_ROLE}
    measured = 0
    durations: list[float] = []

    def reserve() -> float:
        """Verification needs rounds x configs trials of the length seen so far; a leader that
        changes the math also needs its seeded confirmation (recommend.confirm_quality)."""
        if not durations:
            return options.verify_reserve_s
        typical = sorted(durations)[len(durations) // 2]
        need = options.verify_configs * options.verify_rounds * typical
        verify = max(options.verify_reserve_s, min(0.4 * options.budget_s, need))
        # room for two: a class that fails its confirmation hands over to the next class
        return verify + min(0.25 * options.budget_s, 2 * confirmation_cost())

    def confirmation_cost() -> float:
        lead = max((r for r in known.values() if r.feasible and r.throughput
                    and r.result.quality == "accepted"),
                   key=lambda r: r.throughput, default=None)
        if lead is None or book.class_of(lead.config) == book.class_of(base):
            return 0.0
        per_run = (book.run_seconds(base) or 0.0) + (book.run_seconds(lead.config) or 0.0)
        return per_run * len(CONFIRM_SEEDS)

    def left() -> float:
        return options.budget_s - clock.elapsed() - reserve()

    def evaluate_and_record(config: Config, role: str, trial=None) -> Record:
        nonlocal measured
        reason = ruled_out(config, space, topology)
        if reason:
            ev = TrialResult(outcome=R.INFEASIBLE, reason=reason)
        else:
            on_event("trial_start", config=config, role=role, number=len(known))
            try:
                ev = evaluate(config, "throughput")
            except KeyboardInterrupt:
                if trial is not None:  # keep the study honest: this one did not finish
                    stopped = TrialResult(outcome=R.INTERRUPTED,
                                          reason="the search was interrupted during this trial")
                    record_trial(study, config=config, result=stopped, role=role, trial=trial)
                raise
            measured += 1
            if ev.outcome == R.OK and disturbed(ev.outside_share) and left() >= 1.2 * ev.seconds:
                ev = remeasure(config, ev)
            if ev.outcome == R.OK:
                durations.append(ev.seconds)
        if role == DEFAULT_ROLE and ev.outcome == R.OK and ev.throughput:
            warn_if_too_short(config, ev)
        acc, violation, judged = None, 0.0, {}
        if ev.outcome == R.OK and options.reported_accuracy:
            acc = ev.accuracy
            base_rec = known.get(key(base))
            floor = script_floor(config, ev) if role == DEFAULT_ROLE else stored_floor()
            if role == DEFAULT_ROLE and floor is not None:
                judged = {"quality_sd": floor.sd, "quality_n": floor.n}
            # With --accuracy the script promised a number: missing it fails the rule, as a
            # built-in workload's missing accuracy does.
            if role != DEFAULT_ROLE and acc is not None and floor is not None:
                verdict = single_run_gate(floor, acc, options.max_accuracy_drop)
                violation = verdict.margin_pp if verdict.reject else min(0.0, verdict.margin_pp)
                judged = {"quality": "rejected" if verdict.reject else "accepted",
                          "quality_verdict": verdict.describe()}
            elif role != DEFAULT_ROLE and (acc is not None or options.accuracy_required) \
                    and base_rec and base_rec.accuracy is not None:
                violation = _accuracy_violation(acc, base_rec.accuracy, options.max_accuracy_drop)
        elif ev.outcome == R.OK:
            acc, violation, judged = judge(config, ev.throughput or 0.0)
        rec = record_trial(study, config=config, result=replace(ev, accuracy=acc, **judged),
                           violation=violation, role=role, trial=trial)
        known[key(config)] = rec
        on_event("trial_end", record=rec, seconds=ev.seconds)
        if ev.overridden:
            hold(ev.overridden)
        return rec

    def warn_if_too_short(config: Config, ev: TrialResult) -> None:
        """Said once, from the first trial's cost, before the noise floor spends the budget."""
        if options.reported_accuracy:
            runs = max(0, len(options.script_seeds) - 1) if stored_floor() is None else 0
            per_run = ev.seconds
        else:
            runs = len(book.missing_seeds(config))
            per_run = quality_cost(config, ev.throughput or 0.0) / max(runs, 1)
        costs = phase_costs(spent_s=clock.elapsed(), trial_s=ev.seconds, quality_run_s=per_run,
                            quality_runs=runs, verify_rounds=options.verify_rounds)
        message = too_short(costs, options.budget_s)
        if message:
            on_event("warn", text=f"{message}. Going on: what is measured is kept, and the same "
                                  "command with a longer --budget resumes it")

    def stored_floor() -> Sample | None:
        values = A.StudyAttrs.of(study).script_noise_floor.get("values") or []
        return Sample(tuple(values)) if len(values) >= 2 else None

    def script_floor(config: Config, first: TrialResult) -> Sample | None:
        """The default launch's --accuracy over options.script_seeds: measured once (seed 0 is
        the reference run itself), kept on the study for resumes and the report."""
        if stored_floor() is not None or len(options.script_seeds) < 2 or first.accuracy is None:
            return stored_floor()
        more = options.script_seeds[1:]
        if left() < first.seconds * len(more):
            on_event("note", text="no budget for the script's accuracy noise floor: the gate "
                                  "compares single measurements")
            return None
        values, seeds = [first.accuracy], [options.script_seeds[0]]
        for seed in more:
            on_event("note", text=f"accuracy noise floor: default launch, seed {seed}")
            ev = evaluate(config, "throughput", seed=seed)
            if ev.outcome == R.OK and ev.accuracy is not None:
                values.append(ev.accuracy)
                seeds.append(seed)
        A.write_script_noise_floor(study, {"seeds": seeds, "values": values})
        return stored_floor()

    def remeasure(config: Config, first: TrialResult) -> TrialResult:
        """Once more, for a trial whose cores other processes took: the less disturbed of the
        two stands, and its note says so (a still-disturbed one stays marked by its share)."""
        # (one trial measured twice: it counts once in trials_run and against --max-trials)
        on_event("note", text=f"re-measuring: {describe_outside(first.outside_share or 0.0)} "
                              "while it was timed")
        second = evaluate(config, "throughput")
        keep, other = second, first
        if second.outcome != R.OK or (second.outside_share or 0.0) > (first.outside_share or 0.0):
            keep, other = first, second
        share = other.outside_share
        why = ("measured twice; " + (f"in the other run {describe_outside(share)}"
                                      if share is not None else f"the other run: {other.outcome}"))
        return replace(keep, note="; ".join(n for n in (keep.note, why) if n))

    def quality_cost(config: Config, throughput: float) -> float:
        seen = book.run_seconds(config)
        per_run = seen if seen else 8.0 + 1.2 * options.quality_samples / max(throughput, 1.0)
        return per_run * len(book.missing_seeds(config))

    def leader() -> float:
        return max((r.throughput for r in known.values() if r.feasible and r.throughput),
                   default=0.0)

    def judge(config: Config, throughput: float) -> tuple[float | None, float, dict[str, Any]]:
        """Quality of `config`'s math class: measured now when it is the default's class (the
        noise floor) or a contender for the lead, else left pending until it matters.
        Returns (accuracy, violation, the TrialResult fields of the judgement)."""
        is_base = book.class_of(config) == book.class_of(base)
        contender = throughput >= 0.97 * leader()
        if book.missing_seeds(config) and (is_base or contender) \
                and quality_cost(config, throughput) <= max(0.0, left()):
            if book.missing_seeds(base):   # the noise floor is the default launch's own
                book.measure(base, on_run=lambda **i: on_event("quality_start", **i))
            if not is_base:
                book.measure(config, on_run=lambda **i: on_event("quality_start", **i))
        return quality_of(config)

    def quality_of(config: Config) -> tuple[float | None, float, dict[str, Any]]:
        ev, verdict = book.evidence(config), book.verdict(config)
        cls = book.class_of(config)
        if ev is not None and ev.failed and verdict is None:
            return None, 1.0, {"math_class": cls, "quality": f"quality run failed: {ev.failed}"}
        if verdict is None:
            return None, 0.0, {"math_class": cls, "quality": "pending"}
        sample = ev.sample(book.seeds)
        judged = {"math_class": cls, "quality": "rejected" if verdict.reject else "accepted",
                  "quality_sd": sample.sd, "quality_n": sample.n,
                  "quality_verdict": verdict.describe()}
        violation = verdict.margin_pp if verdict.reject else min(0.0, verdict.margin_pp)
        return sample.mean, violation, judged

    # 1. References: what the user gets without tuning, and the best-known launcher heuristic.
    refs: dict[str, Record | None] = {}
    for role, config in reference_configs(topology, base):
        rec = known.get(key(config))
        state, trial = "done", None
        if rec is None and left() > 0:
            # shared: a RUNNING trial carries the claim; alone: stored when done, as before
            state, rec, trial = take(config, study.ask if claims else None)
            if state == "busy":
                on_event("note", text=f"{role}: another worker is measuring it")
        if state == "mine":
            rec = evaluate_and_record(config, role, trial=trial)
            if role == DEFAULT_ROLE and rec.outcome in (R.WORKLOAD_ERROR, R.CRASH):
                # The same failure would repeat on every trial: stop now, show the cause.
                lines = [ln.strip() for ln in rec.result.log_tail.splitlines()
                         if ln.strip() and not ln.startswith("--- rank ")]
                tail = " | ".join(lines[-3:]) or rec.reason
                raise WorkloadError(f"the workload fails on the default launch ({rec.outcome}: "
                                    f"{rec.reason}); last log lines: {tail}")
        refs[role] = rec

    # 2. Sampler-proposed trials until the budget (less verification), stagnation or exhaustion.
    rng = random.Random(options.seed)
    stop_reason, since_gain, repeats = "budget", 0, 0
    best = max((r.throughput for r in known.values() if r.feasible and r.throughput), default=0.0)
    drawn = sum(r.role == SEARCH_ROLE for r in known.values())  # a resumed study has its own
    # a class the quality gate rejected is no place to look (script mode: the script's number)
    guided = _Guide(options.guide, topology, key, ruled_out,
                    rejected=lambda c: not options.reported_accuracy and quality_of(c)[1] > 0)
    while True:
        if left() < options.min_trial_s:
            stop_reason = "budget"
            break
        if options.max_trials is not None and measured >= options.max_trials:
            stop_reason = "max_trials"
            break
        if since_gain >= options.patience and \
                clock.elapsed() >= options.stagnation_after * options.budget_s:
            stop_reason = "stagnated"
            break
        if repeats >= 3:  # the sampler keeps proposing measured configs: explore instead
            taken = {**known, **dict.fromkeys(claims.busy_keys())} if claims else known
            fresh = unseen(space, taken, rng, key)
            if fresh is None:
                stop_reason = "exhausted"
                break
            study.enqueue_trial(fresh)
            repeats = 0
        # shared: what other workers are measuring counts as measured
        proposal = guided.next(space, known, claims.busy_keys() if claims else ())
        if proposal is not None:
            study.enqueue_trial(proposal)
        elif drawn < options.startup_draws:  # TPE's start-up, drawn from what can run here
            draw = launchable_draw(space, rng, lambda p: key(space.to_config(p)) in known,
                                   lambda p: ruled_out(space.to_config(p), space, topology))
            drawn = drawn + 1 if draw is not None else options.startup_draws  # none left: stop
            if draw is not None:
                study.enqueue_trial(draw)
        trial = study.ask(distributions)
        claim_trial(study, trial)
        config = space.to_config(trial.params)
        state, seen, _ = take(config, trial)
        if state == "busy":
            repeats += 1
            claims.release(trial, "another worker is measuring this configuration")
            continue
        if seen is not None:
            # Never run a configuration twice: tell the sampler what it already measured.
            repeats += 1
            # the measurement it reuses, whole (a script's metric too), and where it came from
            mirror = replace(seen.result, accuracy=seen.accuracy, reused_from=seen.number)
            record_trial(study, config=config, result=mirror,
                         violation=0.0 if seen.feasible else 1.0, role=REPEAT_ROLE, trial=trial)
            continue
        repeats = 0
        rec = evaluate_and_record(config, SEARCH_ROLE, trial=trial)
        if rec.outcome != R.INFEASIBLE:
            since_gain += 1
        if rec.feasible and rec.throughput and rec.throughput > best * 1.01:
            best, since_gain = rec.throughput, 0
    # 3. Settle: the fastest configurations whose class is still pending get their quality
    # measured while time allows (a class rejected late can promote one that never led).
    settled = _settle(known, book, quality_of, quality_cost, left, on_event)
    return SearchResult(records=settled, default=refs.get(DEFAULT_ROLE), book=book,
                        run_cpu=refs.get(RUN_CPU_ROLE), stop_reason=stop_reason, measured=measured)


class _Guide:
    """The hardware's first guess, then (guide "descent") coordinate descent around the leader,
    until no neighbour is left: then the start-up draws and the sampler's model take over."""

    def __init__(self, mode: str, topology: Topology, key, ruled_out_fn,
                 rejected: Callable[[Config], bool] = lambda config: False):
        self.mode, self.topology, self.key, self.ruled_out = mode, topology, key, ruled_out_fn
        self.rejected = rejected
        self.descent = Descent(topology) if mode == "descent" else None
        self.guessed = mode == "none"

    def next(self, space, known: dict[str, Record], busy=()) -> dict[str, Any] | None:
        busy = set(busy)

        def measured(p: dict[str, Any]) -> bool:
            k = self.key(space.to_config(p))
            return k in known or k in busy

        def launchable(p: dict[str, Any]) -> bool:
            config = space.to_config(p)
            return self.ruled_out(config, space, self.topology) is None and \
                not self.rejected(config)

        if not self.guessed:
            self.guessed = True
            guess = first_guess(space, self.topology, launchable)
            if guess is not None and not measured(guess):
                return guess
        if self.descent is None:
            return None
        # the fastest configuration not rejected on quality, written in the space's knobs
        for rec in sorted((r for r in known.values() if r.feasible and r.throughput
                           and not self.rejected(r.config)),
                          key=lambda r: r.throughput, reverse=True):
            # as the plan runs it (a reference's automatic threads are a count in the space)
            lead = params_of(rec.config, space) or params_of(canonical(rec.config, self.topology),
                                                             space)
            if lead is not None:
                return self.descent.propose(space, lead, measured, launchable)
        return None


def _settle(known: dict[str, Record], book: "QualityBook", quality_of, quality_cost, left,
            on_event, top: int = 3) -> list[Record]:
    """Records with their final quality; pending ones among the top `top` measured if time allows,
    and any still pending afterwards are not recommendable."""
    def refreshed(r: Record) -> Record:
        if r.outcome != R.OK or r.result.metric_source:
            return r
        acc, violation, judged = quality_of(r.config)
        return replace(r, result=replace(r.result, accuracy=acc, **judged),
                       feasible=violation <= 0 and judged["quality"] != "pending")

    while True:
        recs = [refreshed(r) for r in known.values()]
        ranked = sorted((r for r in recs if r.outcome == R.OK and r.throughput
                         and r.result.quality in ("accepted", "pending")),
                        key=lambda r: r.throughput, reverse=True)[:top]
        pending = [r for r in ranked if r.result.quality == "pending"]
        todo = next((r for r in pending if quality_cost(r.config, r.throughput) <= left()), None)
        if todo is None:
            return recs
        book.measure(todo.config, on_run=lambda **i: on_event("quality_start", **i))


def _accuracy_violation(acc: float | None, base: float | None, max_drop_pp: float) -> float:
    """> 0 when the accuracy fell more than the allowed percentage points below the default."""
    if acc is None or base is None:
        return 1.0 if acc is None else 0.0
    return (base - acc) * 100.0 - max_drop_pp
