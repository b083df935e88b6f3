"""Run one launch configuration as a real, timed DDP trial and print its measured throughput.

Knobs: --set KNOB=VALUE, repeatable; every knob and its values are listed under --set below.
Unset knobs keep the default launch: 1 process, torch's threads, default allocator, fp32.

examples:
  autotune run --set nproc=2 --set threads=1 --dry-run
  autotune run --set allocator=tcmalloc --set precision=bf16 --json
  autotune run --sysfs-root captured/ --set nproc=4 --set binding=numactl --dry-run
  autotune run --sysfs-root gpu-node/ --set device=cuda --set nproc=8 --set backend=nccl --dry-run
      (the plan of a GPU node captured with `autotune probe --capture gpu-node`, printed on a
      CPU login node: the capture's own torch, backends and libraries judge it)
  autotune run --set device=cuda --set nproc=8 --set numa_binding=node --set binding=numactl_smt
  autotune run --set nproc=2 --metric 'img/s: ([0-9.]+)' -- python train.py --bs {batch_size}
  autotune run --hosts node1:1,node2:1 --set nnodes=2 --set nproc=2    across two machines (ssh)
  autotune run --hostfile hosts.txt --launcher mpirun --set nnodes=2 --set nproc=4 --dry-run
"""
from __future__ import annotations

import argparse
import json
import sys

from ..config import KNOB_TABLE, parse_sets
from ..errors import ConfigError
from ..plan.feasible import infeasible_reason
from ..run.trial import TrialSettings, plan_trial, run_trial
from ..measure.script import SOURCES
from ._hosts import add_host_args, cluster_from_args
from ._common import (add_workload_args, check_workload_args, describe_measurement, load_topology,
                      positive_float, script_of, settings_from_args, ACCURACY_HELP)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", action="append", default=[], metavar="KNOB=VALUE",
                   help="set one knob (repeatable): " + knob_list())
    add_workload_args(p)
    p.add_argument("--dry-run", action="store_true",
                   help="print the launch plan (commands, environment, CPU sets) and run nothing")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--accuracy", nargs="?", const=True, default=None, metavar="REGEX",
                   help="built-in workload: also measure held-out accuracy after a fixed number "
                        "of samples; " + ACCURACY_HELP)
    p.add_argument("--timeout", type=positive_float, default=180.0, metavar="SECONDS",
                   help="kill the trial after this long (default: 180)")
    p.add_argument("--sysfs-root", metavar="DIR",
                   help="plan against a captured machine (from `autotune probe --capture`), "
                        "judged by what that machine can do (its capabilities.json: torch's "
                        "CUDA and backends, libraries, tools); only with --dry-run")
    add_host_args(p)


def knob_list() -> str:
    """Every knob of the table with its values, e.g. 'binding (none|taskset|...)': generated, so
    --help cannot lag behind the knobs."""
    def values(knob) -> str:
        shown = ("true", "false") if knob.kind == "bool" else knob.choices
        shown += ("auto",) if knob.auto else ()
        return f" ({'|'.join(shown)})" if shown else ""
    return ", ".join(f"{name}{values(knob)}" for name, knob in KNOB_TABLE.items())


def run(args: argparse.Namespace) -> int:
    config = parse_sets(args.set)
    if args.sysfs_root and not args.dry_run:
        raise ConfigError("--sysfs-root plans against another machine; add --dry-run")
    script = script_of(args)
    check_workload_args(args, script)
    cluster = cluster_from_args(args)
    if cluster is not None and args.sysfs_root:
        raise ConfigError("--sysfs-root plans one captured machine; not with --hosts")
    # Across hosts, plans are built from the hosts' own probes (the first one's for the checks).
    topology = cluster.topologies[0] if cluster else load_topology(args.sysfs_root)
    # What was typed cannot launch here (4096 ranks on 2 cores, a backend torch lacks): an error
    # in the command, not a trial outcome. A search records the same reasons as results instead.
    reason = infeasible_reason(config, topology)
    if reason:
        where = f"the machine in {args.sysfs_root}" if args.sysfs_root else \
            "these hosts" if cluster else "this machine"
        raise ConfigError(f"--set: {reason} (on {where})")
    settings: TrialSettings = settings_from_args(args, script, timeout_s=args.timeout,
                                                 cluster=cluster)
    if args.dry_run:
        if args.sysfs_root:   # a capture without its capabilities: say what was assumed
            from ..probe.captured import CAPABILITIES
            for warning in topology.warnings:
                if CAPABILITIES in warning:
                    print(f"note: {warning}", file=sys.stderr)
        plan = plan_trial(config, topology, settings, trial_id="dry-run", port=29500)
        if args.json:
            print(json.dumps({"config": config.to_dict(), "ranks": [
                {"rank": r.rank, "argv": list(r.argv), "cpus": r.cpus, "mem_node": r.mem_node,
                 "env": {k: r.env[k] for k in sorted(plan.env_delta) if k in r.env}}
                for r in plan.ranks], "env": plan.env_delta, "timeout_s": plan.timeout_s}))
        else:
            print(plan.describe())
        return 0
    if script is not None:
        warning = script.scan.warning()
        if warning:
            print(warning, file=sys.stderr)
        if script.self_launching:
            print("note: the script starts its own workers: autotune launches it once",
                  file=sys.stderr)
    out = run_trial(config, topology, settings)
    # a script reports its accuracy with its speed, if at all
    acc = (run_trial(config, topology, settings, mode="accuracy")
           if args.accuracy is True and out.ok and script is None else None)
    if args.json:
        print(json.dumps(_as_json(config, out, acc), default=str))
    else:
        print(_as_text(config, out, acc))
    return 0 if out.ok and (acc is None or acc.ok) else 1


# The `measurement` object of `run --json`: an ok trial's timed window.
_MEASURED = ("throughput", "throughput_iqr", "median_throughput", "step_median_s", "step_iqr_s",
             "window_s", "timed_steps", "samples", "startup_s", "timed_share", "peak_rss_mb",
             "cpu_share", "accuracy", "curve", "gns")


def _contention_lines(out) -> list[str]:
    """The trial cores' shares over the timed window, and what happened in teardown."""
    from ..measure.contention import describe_outside, disturbed
    lines = [f"note: {out.note}"] if out.note else []
    if out.own_share is not None and out.outside_share is not None:
        lines.append(f"trial cores: {out.own_share:.0%} used by the trial, "
                     f"{out.outside_share:.0%} by other processes"
                     + (f" [disturbed: {describe_outside(out.outside_share)}; measure again]"
                        if disturbed(out.outside_share) else ""))
    return lines


def _as_json(config, out, acc) -> dict:
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


def _as_text(config, out, acc) -> str:
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
