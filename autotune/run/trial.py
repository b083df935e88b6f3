"""One trial end to end: plan -> run -> measure. The only composition of the three stages.

Used by `autotune run`, by the search for every trial, and by verification.
"""
from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..result import Outcome, TrialResult
from ..config import DEFAULT_WORKLOAD, Config
from ..errors import ConfigError
from ..measure.contention import Contention, contention
from ..measure.stats import aggregate
from ..measure.observe import Sampler
from ..measure.unacted import compare
from ..plan.build import build_plan
from ..plan.feasible import infeasible_reason
from ..plan.launch_plan import (KILL_GRACE_S, TARGET_SECONDS, TRIAL_TIMEOUT_S, WARMUP_STEPS,
                                LaunchPlan)
from .weights import weights_problem
from .outcome import RunResult
from .idle import IDLE_DEADLINE_S
from .runner import free_port, run_plan
from .script_trial import observed_fields, script_measured
from ..script.spec import ScriptSpec
from ..script.template import SEED_ENV, fill
from ..probe.topology import Topology
from ..training import QUALITY_SAMPLES

if TYPE_CHECKING:
    from ..plan.cluster import Cluster
    from .warm import WarmLaunches

# No trial's timeout is sized below this (from the first trial's length, or from a budget).
MIN_TRIAL_TIMEOUT_S = 30.0


@dataclass(frozen=True, kw_only=True)
class TrialSettings:
    """How a trial is run and timed (the same for every config of one search)."""
    workload: str = DEFAULT_WORKLOAD
    workload_args: dict[str, Any] = field(default_factory=dict)
    target_seconds: float = TARGET_SECONDS
    warmup_steps: int = WARMUP_STEPS
    # Training samples of one quality run (why this length: autotune/training.py).
    accuracy_samples: int = QUALITY_SAMPLES
    timeout_s: float = TRIAL_TIMEOUT_S
    grace_s: float = KILL_GRACE_S
    results_dir: str = "autotune-results"
    # Script mode: the user's command with {knob} placeholders replaces the built-in worker.
    script: ScriptSpec | None = None
    cluster: "Cluster | None" = None      # the hosts a trial spans (None: this machine only)
    # A rank idle this long after another exited cleanly is stuck in teardown and ended
    # (run/idle.py); 0: never.
    idle_s: float = IDLE_DEADLINE_S
    # Per trial (the live evaluator sets it): the leader a built-in speed run races; a run
    # clearly below it ends its window early (measure/early_stop.py). None: never.
    leader_throughput: float | None = None
    # Per trial too: after a whole window at `ceiling_above` samples/s or more (None: any), the
    # ceiling, timed for about `ceiling_seconds` (0: not asked; worker/train.py)
    ceiling_seconds: float = 0.0
    ceiling_above: float | None = None
    time_phases: bool = True             # the step split's timers (off: the overhead benchmark)


def _window_fields(settings: TrialSettings, mode: str) -> dict[str, Any]:
    """What a built-in worker's request carries beyond the plan's: the split and the ceiling."""
    return {"time_phases": settings.time_phases,
            "ceiling_seconds": settings.ceiling_seconds if mode == "throughput" else 0.0,
            "ceiling_above": settings.ceiling_above}


def plan_trial(config: Config, topology: Topology, settings: TrialSettings, *,
               mode: str = "throughput", trial_id: str | None = None,
               base_env: dict[str, str] | None = None, port: int | None = None,
               seed: int = 0) -> LaunchPlan:
    trial_id = trial_id or f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    workdir = os.path.abspath(os.path.join(settings.results_dir, "trials", trial_id))
    program = fill(settings.script.command, config, seed) if settings.script else None
    if settings.cluster is not None:
        from ..plan.cluster import build_cluster_plan
        from .remote import free_port_on
        plan = build_cluster_plan(
            config, settings.cluster, workdir=workdir, trial_id=trial_id, program=program,
            script=program is not None,
            master_port=port if port is not None else free_port_on(settings.cluster),
            base_env=dict(os.environ) if base_env is None else base_env,
            timeout_s=settings.timeout_s, grace_s=settings.grace_s, workload=settings.workload,
            workload_args=settings.workload_args, mode=mode,
            target_seconds=settings.target_seconds, warmup_steps=settings.warmup_steps,
            accuracy_samples=settings.accuracy_samples, seed=seed,
            leader_throughput=settings.leader_throughput,
            # a script reads its seed from the environment when its command has no {seed}
            script_env={SEED_ENV: str(seed)})
        return _with_window_fields(plan, settings, mode)
    plan = build_plan(config, topology, workload=settings.workload, program=program,
                      script=program is not None,
                      workload_args=settings.workload_args, workdir=workdir,
                      master_port=port if port is not None else free_port(),
                      base_env=dict(os.environ) if base_env is None else base_env,
                      timeout_s=settings.timeout_s, grace_s=settings.grace_s, mode=mode,
                      target_seconds=settings.target_seconds, warmup_steps=settings.warmup_steps,
                      accuracy_samples=settings.accuracy_samples, trial_id=trial_id, seed=seed,
                      local_rank_arg=settings.script.local_rank_arg if settings.script else None,
                      leader_throughput=settings.leader_throughput)
    if not plan.script:
        return _with_window_fields(plan, settings, mode)
    # A script reads its seed from the environment when its command has no {seed}.
    return replace(plan, ranks=tuple(replace(r, env={**r.env, SEED_ENV: str(seed)})
                                     for r in plan.ranks))


def _with_window_fields(plan: LaunchPlan, settings: TrialSettings, mode: str) -> LaunchPlan:
    return plan if plan.script else \
        replace(plan, request=replace(plan.request, **_window_fields(settings, mode)))


def trial_infeasible(config: Config, topology: Topology, settings: TrialSettings) -> str | None:
    """Why this configuration cannot run where the settings say trials run (None: it can)."""
    if settings.cluster is not None:
        from ..plan.cluster import infeasible_on_cluster
        return infeasible_on_cluster(config, settings.cluster)
    if config.nnodes > 1:
        return f"nnodes={config.nnodes} needs --hosts (or a hostfile or SLURM allocation)"
    if config.backend == "mpi":   # ranks started one by one are each an MPI world of one
        return ("backend mpi: the ranks must be started by mpirun (--launcher mpirun with "
                "--hosts; --hosts localhost for this machine)")
    return infeasible_reason(config, topology)


def run_trial(config: Config, topology: Topology, settings: TrialSettings, *,
              mode: str = "throughput", trial_id: str | None = None, seed: int = 0,
              warm: "WarmLaunches | None" = None) -> TrialResult:
    """Run one configuration: what the trial yields. Never raises for a failing trial: the
    failure is the result. `warm`: the built-in worker runs as a window of its launch's
    session, started when none runs (run/warm.py), on this machine or across hosts (unless
    plan/cluster.kept_problem says why not)."""
    kept = warm if _kept_across_hosts(settings) else None
    plan, reason = _planned(config, topology, settings, mode, trial_id, seed,
                            port=0 if kept is not None else None)
    if plan is None:
        return TrialResult(outcome=Outcome.INFEASIBLE, reason=reason, mode=mode,
                           metric_source="worker" if settings.script else None)
    if kept is not None:   # across hosts, a window of the launch kept running there
        run, _ = kept.run(config, _kept_plan_of(plan, config, topology, settings, mode, seed),
                          settings.timeout_s, where=_hosts_of(config, settings))
        return _worker_yield(run, mode, seed)
    if plan.launchers:   # across hosts: the launchers start the ranks there
        from .spanning import run_cluster_plan
        return _cluster_yield(plan, run_cluster_plan(plan), settings, mode, seed)
    if not plan.script and warm is not None:
        run, _ = warm.run(config, lambda serve_s: replace(plan, request=replace(
            plan.request, serve_s=serve_s)), settings.timeout_s)
        return _worker_yield(run, mode, seed)
    if not plan.script:
        return _worker_yield(run_plan(plan, idle_s=settings.idle_s), mode, seed)
    samplers: list[Sampler] = []
    try:
        run = run_plan(plan, on_start=lambda pids: samplers.append(Sampler(pids).start()),
                       idle_s=settings.idle_s)
    finally:
        observed = tuple(samplers[0].stop()) if samplers else ()
    run, measured, script = script_measured(plan, run, settings)
    script.update(observed_fields(observed, compare(plan.request.ranks, observed)
                                  if run.ok else ()))
    return _yielded(run, mode, seed, measured, script)


def run_trials_at_once(config: Config, topology: Topology, settings: list[TrialSettings], *,
                       mode: str, seeds: list[int],
                       warm: "WarmLaunches | None" = None) -> list[TrialResult]:
    """One configuration run once per settings at the same time, each across its own hosts
    (settings[i].cluster: disjoint lanes of one cluster, plan/cluster.Cluster.lane), with
    seeds[i]: a math class's seeded quality runs side by side; with `warm`, each as a window
    of its lane's launch, kept running there."""
    from .spanning import run_cluster_plans
    kept = warm if all(_kept_across_hosts(s) for s in settings) else None
    port = 0 if kept is not None else None
    planned = [_planned(config, topology, s, mode, None, seed, port=port)
               for s, seed in zip(settings, seeds)]
    plans = [p for p, _ in planned if p is not None]
    if kept is not None:
        asks = [(config, _kept_plan_of(plan, config, topology, s, mode, seed),
                 _hosts_of(config, s))
                for (plan, _r), s, seed in zip(planned, settings, seeds) if plan is not None]
        runs = iter([run for run, _ in kept.run_together(asks, settings[0].timeout_s)])
    else:
        runs = iter(run_cluster_plans(plans))
    out = []
    for (plan, reason), s, seed in zip(planned, settings, seeds):
        out.append(TrialResult(outcome=Outcome.INFEASIBLE, reason=reason, mode=mode)
                   if plan is None else _cluster_yield(plan, next(runs), s, mode, seed))
    return out


def _kept_across_hosts(settings: TrialSettings) -> bool:
    """Whether trials over the settings' hosts (none: on this machine) are windows of a launch
    kept running there (plan/cluster.kept_problem)."""
    if settings.cluster is None or settings.script is not None:
        return False
    from ..plan.cluster import kept_problem
    return kept_problem(settings.cluster) is None


def _kept_plan_of(plan: LaunchPlan, config: Config, topology: Topology,
                  settings: TrialSettings, mode: str, seed: int):
    """`plan_of(serve_s)` for run/warm.py: a window needs only the request of `plan` (planned
    without a port: no call to the first host); a start, the plan again with a port free
    there, its request asking for a session."""
    def plan_of(serve_s: float) -> LaunchPlan:
        if serve_s <= 0:
            return plan
        started = plan_trial(config, topology, settings, mode=mode, seed=seed,
                             trial_id=os.path.basename(plan.workdir))
        return replace(started, request=replace(started.request, serve_s=serve_s))
    return plan_of


def _hosts_of(config: Config, settings: TrialSettings) -> tuple[str, ...]:
    """The hosts a trial across hosts runs on (with the launch, what makes it the same one)."""
    assert settings.cluster is not None
    return tuple(h.name for h in settings.cluster.hosts[:config.nnodes])


def _planned(config: Config, topology: Topology, settings: TrialSettings, mode: str,
             trial_id: str | None, seed: int,
             port: int | None = None) -> tuple[LaunchPlan | None, str | None]:
    """(the plan, None), or (None, why the configuration cannot run)."""
    reason = trial_infeasible(config, topology, settings)
    if not reason and config.mem_policy == "weighted" and settings.cluster is None:
        reason = weights_problem(topology)   # the kernel's weights, set before the launch
    if not reason and settings.script and settings.script.self_launching and config.nproc > 1:
        reason = (f"nproc={config.nproc}: the script starts its own workers, so autotune launches "
                  "it once (more copies would oversubscribe the cores)")
    if reason:
        return None, reason
    try:
        return plan_trial(config, topology, settings, mode=mode, trial_id=trial_id,
                          seed=seed, port=port), None
    except ConfigError as exc:
        return None, str(exc)


def _cluster_yield(plan: LaunchPlan, run: RunResult, settings: TrialSettings, mode: str,
                   seed: int) -> TrialResult:
    if plan.script:
        run, measured, script = script_measured(plan, run, settings)
        return _yielded(run, mode, seed, measured, script)
    return _worker_yield(run, mode, seed)


def _worker_yield(run: RunResult, mode: str, seed: int) -> TrialResult:
    """The built-in worker's trial: its ranks' reports aggregated (a malformed one: a crash)."""
    measured = None
    if run.ok:
        try:
            measured = aggregate(list(run.rank_results), run.launched_at)
        except (KeyError, ValueError, TypeError, IndexError) as exc:
            run = replace(run, outcome=Outcome.CRASH, reason=f"malformed result: {exc}", notes=(),
                          signalled=(), cpu_samples=(), num_cpus=0)
    return _yielded(run, mode, seed, measured, {})


def _yielded(run: RunResult, mode: str, seed: int, measured: TrialResult | None,
             script: dict[str, Any]) -> TrialResult:
    """The runner's record and the measurement (None unless the run was ok) as one result: the
    outcome, what it cost, contention over the timed window, and for a failure the log tail."""
    out = measured if measured is not None and run.ok else TrialResult(outcome=run.outcome,
                                                                     log_tail=run.log_tail)
    if mode == "throughput":   # a throughput window has no seed, curve or noise probe
        out = replace(out, curve=(), gns=None)
    fields: dict[str, Any] = dict(script)
    if (c := timed_contention(run)) is not None:
        fields.update(own_share=round(c.own_share, 4), outside_share=round(c.outside_share, 4))
    return replace(out, outcome=run.outcome, reason=run.reason, mode=mode,
                   seed=seed if mode != "throughput" and out.ok else None,
                   seconds=run.wall_seconds, ignored_files=run.ignored,
                   note="; ".join(n for n in (*run.notes, out.note) if n), **fields)


def timed_contention(run: RunResult) -> Contention | None:
    """Contention over rank 0's timed window (a script has none: its whole run)."""
    r0 = run.rank_results[0] if run.rank_results else {}
    start, end = r0.get("timed_start_at"), r0.get("timed_end_at")
    if not (isinstance(start, (int, float)) and isinstance(end, (int, float))):
        start, end = run.launched_at, run.launched_at + run.wall_seconds
    return contention(run.cpu_samples, float(start), float(end), run.num_cpus)
