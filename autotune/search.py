"""The search loop: references first, then sampler-proposed trials within the budget.

Evaluation and time are injected (`evaluate`, `clock`), so the same loop drives real trials and
the benchmark that replays a recorded landscape in seconds.
"""
from __future__ import annotations

import random
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import optuna
from optuna.distributions import CategoricalDistribution

from . import results as R
from .config import Config
from .errors import WorkloadError
from .plan import canonical, infeasible_reason
from .study import Record, claim_trial, record_trial, records
from .topology import Topology

DEFAULT_ROLE = "reference:default"
RUN_CPU_ROLE = "reference:run_cpu"


@dataclass(frozen=True, kw_only=True)
class Evaluation:
    """What evaluating one configuration gave (a real trial, or a row of a recorded landscape)."""
    outcome: str
    reason: str = ""
    throughput: float | None = None
    accuracy: float | None = None
    seconds: float = 0.0
    attrs: dict[str, Any] = field(default_factory=dict)


Evaluate = Callable[[Config, str], Evaluation]  # (config, "throughput" | "accuracy")


class Clock(Protocol):
    def elapsed(self) -> float: ...


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    budget_s: float
    verify_reserve_s: float = 0.0
    min_trial_s: float = 10.0
    max_accuracy_drop: float = 1.0   # percentage points below the default launch
    patience: int = 30               # measured trials without a 1% gain before stopping
    # ... but not before this share of the budget is spent: on large machines (thousands of
    # configurations, benchmarks/search_at_scale.py) 30 flat trials came after ~9 of 30 minutes
    # with the best find still ~7% below the optimum, which the remaining budget would have found.
    stagnation_after: float = 0.5
    verify_configs: int = 4          # default launch + candidates re-run in each verify round
    verify_rounds: int = 3
    seed: int = 0
    max_trials: int | None = None
    # Script mode: accuracy is whatever the script reported with its speed (maybe nothing); it
    # constrains only when both the trial and the default launch reported one.
    reported_accuracy: bool = False


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    records: list[Record]
    default: Record | None
    run_cpu: Record | None
    stop_reason: str
    measured: int      # configurations actually launched (this run)


def make_sampler(seed: int = 0) -> optuna.samplers.BaseSampler:
    # Multivariate TPE models knob interactions (threads x nproc, allocator x precision) that an
    # independent sampler misses; a short random start keeps the first trials diverse. group=True
    # because the reference trials carry no parameters (their configs need not lie in the space)
    # and would otherwise empty the joint search space, silently making TPE independent.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True,
                                          n_startup_trials=6, constant_liar=False)


def reference_configs(topology: Topology, base: Config) -> list[tuple[str, Config]]:
    """The default launch, and the launcher heuristic of torch.backends.xeon.run_cpu: one process
    per NUMA node on its physical cores, bound, with the best allocator and OpenMP found."""
    caps = topology.capabilities
    nodes = max(1, len(topology.compute_nodes()))
    alloc = next((a for a in ("tcmalloc", "jemalloc") if caps.allocators.get(a)), "default")
    binding = "numactl" if caps.numactl else "taskset" if caps.taskset else "none"
    run_cpu = base.with_(nproc=nodes, nproc_per_node=1 if nodes > 1 else None, threads=None,
                         binding=binding, allocator=alloc,
                         omp_runtime="libiomp5" if caps.omp_runtimes.get("libiomp5") else "libgomp")
    return [(DEFAULT_ROLE, base), (RUN_CPU_ROLE, run_cpu)]


class _Accuracy:
    """Accuracy per distinct (global batch, precision): the other knobs do not change the math."""

    def __init__(self, study: optuna.Study, evaluate: Evaluate):
        self.study, self.evaluate = study, evaluate
        self.cache: dict[str, float | None] = {
            k[len("accuracy:"):]: v for k, v in study.user_attrs.items() if k.startswith("accuracy:")}

    def of(self, config: Config) -> tuple[float | None, float]:
        key = f"{config.global_batch_size}:{config.precision}"
        if key in self.cache:
            return self.cache[key], 0.0
        ev = self.evaluate(config, "accuracy")
        acc = ev.accuracy if ev.outcome == R.OK else None
        self.cache[key] = acc
        self.study.set_user_attr(f"accuracy:{key}", acc)
        return acc, ev.seconds


def run_search(study: optuna.Study, *, space, topology: Topology, evaluate: Evaluate,
               clock: Clock, options: SearchOptions,
               on_event: Callable[..., None] = lambda kind, **info: None) -> SearchResult:
    distributions = {k: CategoricalDistribution(list(v)) for k, v in space.knobs.items()}
    accuracy = _Accuracy(study, evaluate)

    def key(config: Config) -> str:  # two spellings of one launch are one configuration
        return canonical(config, topology).key()

    # A "repeat" row only mirrors the measurement it reuses; on resume, the original is the one
    # that stands for the config (candidates would otherwise be reported as role "repeat").
    known = {key(r.config): r for r in records(study) if r.role != "repeat"}
    measured = 0
    base = Config()  # the default launch: 1 process, torch's threads, default allocator, fp32
    durations: list[float] = []

    def reserve() -> float:
        """Verification needs rounds x configs trials of the length seen so far."""
        if not durations:
            return options.verify_reserve_s
        typical = sorted(durations)[len(durations) // 2]
        need = options.verify_configs * options.verify_rounds * typical
        return max(options.verify_reserve_s, min(0.4 * options.budget_s, need))

    def left() -> float:
        return options.budget_s - clock.elapsed() - reserve()

    def evaluate_and_record(config: Config, role: str, trial=None) -> Record:
        nonlocal measured
        reason = ruled_out(config, space, topology)
        if reason:
            ev = Evaluation(outcome=R.INFEASIBLE, reason=reason)
        else:
            on_event("trial_start", config=config, role=role, number=len(known))
            try:
                ev = evaluate(config, "throughput")
            except KeyboardInterrupt:
                if trial is not None:  # keep the study honest: this one did not finish
                    record_trial(study, config=config, outcome=R.INTERRUPTED, role=role,
                                 reason="the search was interrupted during this trial", trial=trial)
                raise
            measured += 1
            if ev.outcome == R.OK:
                durations.append(ev.seconds)
        acc, violation = None, 0.0
        if ev.outcome == R.OK and options.reported_accuracy:
            acc = ev.accuracy
            base_rec = known.get(key(base))
            if role != DEFAULT_ROLE and acc is not None and base_rec and base_rec.accuracy is not None:
                violation = _accuracy_violation(acc, base_rec.accuracy, options.max_accuracy_drop)
        elif ev.outcome == R.OK:
            acc, _ = accuracy.of(config)
            # The default launch is the accuracy reference: it cannot fall short of itself.
            if role != DEFAULT_ROLE:
                violation = _accuracy_violation(acc, accuracy.of(base)[0], options.max_accuracy_drop)
        number = record_trial(study, config=config, outcome=ev.outcome, reason=ev.reason,
                              throughput=ev.throughput, accuracy=acc, violation=violation,
                              role=role, attrs={**ev.attrs, "seconds": ev.seconds}, trial=trial)
        rec = Record(config=config, outcome=ev.outcome, reason=ev.reason,
                     throughput=ev.throughput if ev.outcome == R.OK else None, accuracy=acc,
                     feasible=ev.outcome == R.OK and violation <= 0, role=role, number=number,
                     attrs=dict(ev.attrs))
        known[key(config)] = rec
        on_event("trial_end", record=rec, seconds=ev.seconds)
        return rec

    # 1. References: what the user gets without tuning, and the best-known launcher heuristic.
    refs: dict[str, Record | None] = {}
    for role, config in reference_configs(topology, base):
        rec = known.get(key(config))
        if rec is None and left() > 0:
            rec = evaluate_and_record(config, role, trial=None)
            if role == DEFAULT_ROLE and rec.outcome in (R.WORKLOAD_ERROR, R.CRASH):
                # The same failure would repeat on every trial: stop now, show the cause.
                lines = [ln.strip() for ln in rec.attrs.get("log_tail", "").splitlines()
                         if ln.strip() and not ln.startswith("--- rank ")]
                tail = " | ".join(lines[-3:]) or rec.reason
                raise WorkloadError(f"the workload fails on the default launch ({rec.outcome}: "
                                    f"{rec.reason}); last log lines: {tail}")
        refs[role] = rec

    # 2. Sampler-proposed trials until the budget (less verification), stagnation or exhaustion.
    rng = random.Random(options.seed)
    stop_reason, since_gain, repeats = "budget", 0, 0
    best = max((r.throughput for r in known.values() if r.feasible and r.throughput), default=0.0)
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
            fresh = _unseen(space, known, rng, key)
            if fresh is None:
                stop_reason = "exhausted"
                break
            study.enqueue_trial(fresh)
            repeats = 0
        trial = study.ask(distributions)
        claim_trial(trial)
        config = space.to_config(trial.params)
        seen = known.get(key(config))
        if seen is not None:
            # Never run a configuration twice: tell the sampler what it already measured.
            repeats += 1
            record_trial(study, config=config, outcome=seen.outcome, reason=seen.reason,
                         throughput=seen.throughput, accuracy=seen.accuracy,
                         violation=0.0 if seen.feasible else 1.0, role="repeat",
                         attrs={"reused_from": seen.number}, trial=trial)
            continue
        repeats = 0
        rec = evaluate_and_record(config, "search", trial=trial)
        if rec.outcome != R.INFEASIBLE:
            since_gain += 1
        if rec.feasible and rec.throughput and rec.throughput > best * 1.01:
            best, since_gain = rec.throughput, 0
    return SearchResult(records=[r for r in known.values()], default=refs.get(DEFAULT_ROLE),
                        run_cpu=refs.get(RUN_CPU_ROLE), stop_reason=stop_reason, measured=measured)


def ruled_out(config: Config, space, topology: Topology) -> str | None:
    """Why `config` cannot be launched here (the planner's reason or a broken space rule), or
    None. Ruled-out configurations are recorded as infeasible without running."""
    reason = infeasible_reason(config, topology)
    if reason:
        return reason
    check = getattr(space, "violations", None)
    broken = check(config.to_dict()) if check else []
    return f"violates {broken[0]}" if broken else None


def _accuracy_violation(acc: float | None, base: float | None, max_drop_pp: float) -> float:
    """> 0 when the accuracy fell more than the allowed percentage points below the default."""
    if acc is None or base is None:
        return 1.0 if acc is None else 0.0
    return (base - acc) * 100.0 - max_drop_pp


def _unseen(space, known: dict[str, Record], rng: random.Random,
            key: Callable[[Config], str]) -> dict[str, Any] | None:
    """A random configuration of the space not evaluated yet (None when all are)."""
    knobs = space.knobs
    for _ in range(500):
        params = {k: rng.choice(list(v)) for k, v in knobs.items()}
        if key(space.to_config(params)) not in known:
            return params
    for params in space.grid():  # small or nearly exhausted spaces: walk the grid
        if key(space.to_config(params)) not in known:
            return params
    return None
