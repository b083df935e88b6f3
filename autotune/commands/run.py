"""`autotune run`: one launch configuration as a real, timed DDP trial (or, with --dry-run, its
plan), on this machine, a captured one (--sysfs-root) or across hosts."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..config import Config
from ..errors import ConfigError
from ..measure.contention import describe_outside, disturbed
from ..measure.script import SOURCES
from ..plan.feasible import infeasible_reason
from ..plan.launch_plan import CEILING_SECONDS, LaunchPlan
from ..plan.memory import wanted_weights, weight_commands
from ..probe import probe
from ..probe.captured import CAPABILITIES
from ..probe.topology import Topology
from ..result import TrialResult
from ..run.numa_quiet import disturbs
from ..run.trial import plan_trial, run_trial
from ..run.trials_dir import check_results
from ..run.weights import apply_weights, describe as describe_weights
from .common import Say, Workload, describe_measurement, quiet
from .hosts import Hosts, probe_hosts
from .search_request import check_workload


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    config: Config
    workload: Workload = field(default_factory=Workload)
    timeout_s: float = 180.0
    dry_run: bool = False
    accuracy: bool = False          # a built-in workload's held-out accuracy, measured after
    sysfs_root: str | None = None   # plan against a captured machine (with dry_run only)
    hosts: Hosts = field(default_factory=Hosts)

    def __post_init__(self) -> None:
        if self.sysfs_root and not self.dry_run:
            raise ConfigError("--sysfs-root plans against another machine; add --dry-run")


@dataclass(frozen=True, kw_only=True)
class RunAnswer:
    """A dry run's plan, or the trial's result (and its accuracy run's)."""
    config: Config
    plan: LaunchPlan | None = None
    trial: TrialResult | None = None
    accuracy: TrialResult | None = None

    @property
    def exit_code(self) -> int:
        if self.trial is None:
            return 0
        return 0 if self.trial.ok and (self.accuracy is None or self.accuracy.ok) else 1

    def to_json(self) -> dict[str, Any]:
        if self.plan is not None:
            plan = self.plan
            return {"config": self.config.to_dict(), "ranks": [
                {"rank": r.rank, "argv": list(r.argv), "cpus": r.cpus, "mem_node": r.mem_node,
                 "mem_policy": r.mem_policy,
                 "env": {k: r.env[k] for k in sorted(plan.env_delta) if k in r.env}}
                for r in plan.ranks], "env": plan.env_delta, "timeout_s": plan.timeout_s}
        return _as_json(self.config, self.trial, self.accuracy)

    def text(self) -> str:
        if self.plan is not None:
            return self.plan.describe()
        return _as_text(self.config, self.trial, self.accuracy)


def run(req: RunRequest, *, say: Say = quiet) -> RunAnswer:
    """Check what was asked, then plan it (dry run) or run it. A configuration that cannot
    launch where it was asked is an error in the command, not a trial outcome (a search records
    the same reasons as results instead)."""
    script = req.workload.script
    check_workload(req.workload.workload, script)
    if not req.dry_run:   # its trial folder must be the user's alone (before anything is written)
        check_results(req.workload.results)
    # every host must reach that folder as this machine does (a dry run writes nothing)
    cluster = probe_hosts(req.hosts, say, results=None if req.dry_run else req.workload.results)
    if cluster is not None and req.sysfs_root:
        raise ConfigError("--sysfs-root plans one captured machine; not with --hosts")
    # Across hosts, plans are built from the hosts' own probes (the first one's for the checks).
    topology = cluster.topologies[0] if cluster else probe(req.sysfs_root)
    reason = infeasible_reason(req.config, topology)
    if reason:
        where = f"the machine in {req.sysfs_root}" if req.sysfs_root else \
            "these hosts" if cluster else "this machine"
        raise ConfigError(f"--set: {reason} (on {where})")
    settings = req.workload.settings(timeout_s=req.timeout_s, cluster=cluster)
    settings = replace(settings, ceiling_seconds=CEILING_SECONDS)   # built-ins: the ceiling too
    if req.dry_run:
        if req.sysfs_root:   # a capture without its capabilities: say what was assumed
            for warning in topology.warnings:
                if CAPABILITIES in warning:
                    say(f"note: {warning}")
        if req.config.mem_policy == "weighted":
            say(f"note: mem_policy=weighted runs with the weights "
                f"{weight_commands(wanted_weights(topology))}"
                " (a real run sets them first; a dry run changes nothing)")
        return RunAnswer(config=req.config, plan=plan_trial(req.config, topology, settings,
                                                            trial_id="dry-run", port=29500))
    if script is not None:
        if script.scan.warning():
            say(script.scan.warning())
        if script.self_launching:
            say("note: the script starts its own workers: autotune launches it once")
    if cluster is None:
        _before_launch(req.config, topology, say)
    out = run_trial(req.config, topology, settings)
    # a script reports its accuracy with its speed, if at all
    acc = (run_trial(req.config, topology, settings, mode="accuracy")
           if req.accuracy and out.ok and script is None else None)
    return RunAnswer(config=req.config, trial=out, accuracy=acc)


def _before_launch(config: Config, topology: Topology, say: Say) -> None:
    """Says when numa_balancing may disturb the timing, and sets the kernel's weighted-interleave
    weights for mem_policy=weighted; a weight file that refuses them is a one-line error (exit
    2) with nothing changed (run/weights.py)."""
    warning = disturbs(topology.memory.numa_balancing, len(topology.numa_nodes))
    if warning:
        say(f"note: {warning}")
    changes = apply_weights(topology) if config.mem_policy == "weighted" else []
    if changes:
        say(f"note: {describe_weights(changes)}")


# The `measurement` object of `run --json`: an ok trial's timed window.
_MEASURED = ("throughput", "throughput_iqr", "median_throughput", "step_median_s", "step_iqr_s",
             "window_s", "timed_steps", "samples", "startup_s", "timed_share", "peak_rss_mb",
             "cpu_share", "accuracy", "curve", "gns", "split", "ceiling", "ceiling_split",
             "fixed")


def _contention_lines(out: TrialResult) -> list[str]:
    """The trial cores' shares over the timed window, and what happened in teardown."""
    lines = [f"note: {out.note}"] if out.note else []
    if out.own_share is not None and out.outside_share is not None:
        lines.append(f"trial cores: {out.own_share:.0%} used by the trial, "
                     f"{out.outside_share:.0%} by other processes"
                     + (f" [disturbed: {describe_outside(out.outside_share)}; measure again]"
                        if disturbed(out.outside_share) else ""))
    return lines


def _as_json(config: Config, out: TrialResult, acc: TrialResult | None) -> dict[str, Any]:
    script = out.metric_source is not None
    return {"own_share": out.own_share, "outside_share": out.outside_share,
            "notes": [out.note] if out.note else [], "config": config.to_dict(),
            "outcome": out.outcome, "reason": out.reason,
            "log_tail": out.log_tail if not out.ok else "", "wall_seconds": out.seconds,
            "measurement": {k: getattr(out, k) for k in _MEASURED} if out.ok else None,
            "metric_source": out.metric_source or "worker", "metric_shown": out.metric_shown,
            "unacted": list(out.unacted), "observed": list(out.observed),
            "accuracy": acc.accuracy if acc and acc.ok else
            (out.accuracy if out.ok and script else None)}


def _as_text(config: Config, out: TrialResult, acc: TrialResult | None) -> str:
    knobs = " ".join(f"{k}={v}" for k, v in config.to_dict().items())
    lines = [f"config: {knobs}", f"outcome: {out.outcome}" + (f" ({out.reason})" if
                                                              out.reason else "")]
    if not out.ok:
        if out.log_tail:
            lines += ["log tail:", out.log_tail.rstrip()]
        return "\n".join(lines)
    if out.metric_source is not None:
        lines.append(f"measured: {out.metric_shown} (from {SOURCES[out.metric_source]})")
        lines += [f"did not act: {u}" for u in out.unacted]
        if out.accuracy is not None:
            lines.append(f"accuracy (reported): {out.accuracy:.4g}")
        lines += _contention_lines(out)
        lines.append(f"wall time: {out.seconds:.1f}s")
        return "\n".join(lines)
    lines.append(describe_measurement(out))
    lines += _contention_lines(out)
    if acc is not None:
        lines.append(f"accuracy: {acc.accuracy:.3f}" if acc.ok
                     else f"accuracy: failed ({acc.outcome}: {acc.reason})")
    lines.append(f"wall time: {out.seconds:.1f}s")
    return "\n".join(lines)
