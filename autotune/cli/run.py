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
from ..tune import RunRequest, run as run_config
from ._common import (ACCURACY_HELP, JSON_HELP, add_switch, add_workload_args, positive_float,
                      workload_of)
from ._hosts import add_host_args, hosts_of, only_task_zero


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", action="append", default=[], metavar="KNOB=VALUE",
                   help="set one knob (repeatable): " + knob_list())
    add_workload_args(p)
    add_switch(p, "--dry-run",
               "print the launch plan (commands, environment, CPU sets) and run nothing")
    add_switch(p, "--json", JSON_HELP)
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
    if not only_task_zero("trial"):
        return 0
    answer = run_config(RunRequest(config=parse_sets(args.set), workload=workload_of(args),
                                   timeout_s=args.timeout, dry_run=args.dry_run,
                                   accuracy=args.accuracy is True, sysfs_root=args.sysfs_root,
                                   hosts=hosts_of(args)),
                        say=lambda line: print(line, file=sys.stderr))
    if args.json:
        print(json.dumps(answer.to_json(), default=str))
    else:
        print(answer.text())
    return answer.exit_code
