"""Run your training command with this machine's tuned configuration: ranks, core binding,
environment, allocator and OpenMP runtime exactly as `autotune export` writes them. The
configuration is the study's verified recommendation, or a manifest written by
`autotune export --format json` (carry it to identical machines).

Each rank's output is shown prefixed with its rank and kept in --log-dir. Ctrl-C and other signals
go to every rank; when one rank fails the others are stopped; the exit code is the worst rank's.
Once a rank has exited cleanly, a rank that then sits idle (no CPU use, no output) for
--idle-timeout seconds is stuck in teardown (gloo's destroy_process_group, typically): it is
ended, the warning names it and where it sat, and it counts as finished (exit 0 when every other
rank exited 0). A rank still computing, say writing a checkpoint, is left alone.
A recommendation measured on other hardware or another torch, a study without a verified
recommendation, or a manifest from another machine is refused (exit 2); --force overrides.
Without `--`, the command stored in the study or manifest runs only when only you can write its
file and every folder above it (and, for a manifest, the study it was exported from); otherwise
launch prints the exact command with a short hash and stops until you add --trust-study HASH
(--dry-run shows it, running nothing). Launch prints the command before it runs it.

examples:
  autotune launch -- python train.py --epochs 10
  autotune launch --dry-run -- python train.py        what would run, per rank
  autotune launch --config launch.json -- python train.py --batch-size {batch_size}
  autotune launch --nproc-per-node 4 -- python train.py        override the tuned rank count
  autotune launch --nnodes 2 --node-rank 0 --master-addr host0 -- python train.py   (each host)
  autotune launch                                      the command the search tuned, as exported
  autotune launch --trust-study 1f0c2a9be4d7           the same from a shared study, once read
"""
from __future__ import annotations

import argparse
import sys

from ..util.clean import printable
from ..tune import LaunchRequest, launch
from ._common import (STORED_COMMAND_HELP, add_idle_arg, add_study_args, add_switch, add_trust_arg,
                      int_at_least, study_of)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_study_args(p)
    p.add_argument("--config", metavar="FILE",
                   help="a manifest from `autotune export --format json` instead of a study")
    add_switch(p, "--force", "launch even when the configuration was measured on other "
               "hardware, with another torch, or never verified")
    add_switch(p, "--dry-run", "print each rank's environment and command; run nothing")
    p.add_argument("--log-dir", metavar="DIR",
                   help="folder for rank{N}.log (default: RESULTS/launch/<time>-<pid>)")
    p.add_argument("--nproc-per-node", type=int_at_least(1), metavar="N",
                   help="ranks on this host, overriding the recommendation (as torchrun's)")
    p.add_argument("--nnodes", type=int_at_least(1), default=1, metavar="N",
                   help="hosts in the job; run the same launch on each (as torchrun's)")
    p.add_argument("--node-rank", type=int_at_least(0), default=0, metavar="R",
                   help="this host's index, 0..nnodes-1 (default: 0)")
    p.add_argument("--master-addr", metavar="HOST",
                   help="host of node rank 0 (needed with --nnodes > 1)")
    p.add_argument("--master-port", type=int_at_least(1), metavar="PORT",
                   help="rendezvous port (default: 29500 across hosts, a free one otherwise)")
    p.add_argument("--check-seconds", type=float, default=15.0, metavar="S",
                   help="watch the ranks compute for this long, then say from outside whether each planned "
                        "knob acted (threads, binding, allocator, OpenMP, memory policy); "
                        "0: do not check (default: 15)")
    add_trust_arg(p, "without `--`: run the command stored in the study or manifest "
                     f"{STORED_COMMAND_HELP}")
    add_idle_arg(p)
    p.set_defaults(script=None)


def run(args: argparse.Namespace) -> int:
    req = LaunchRequest(command=args.script, config_file=args.config, study=study_of(args),
                        force=args.force, dry_run=args.dry_run, log_dir=args.log_dir,
                        nproc_per_node=args.nproc_per_node, nnodes=args.nnodes,
                        node_rank=args.node_rank, master_addr=args.master_addr,
                        master_port=args.master_port, check_seconds=args.check_seconds,
                        trust_study=args.trust_study, idle_timeout=args.idle_timeout)
    launched = launch(req, say=lambda line: print(line, file=sys.stderr, flush=True),
                      echo=sys.stdout)
    if launched.dry_run is not None:
        print(printable(launched.dry_run))
    return launched.exit_code
