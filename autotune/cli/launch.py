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
Without `--`, the command stored in the study or manifest runs only when it is a file only you
can write; otherwise launch prints the exact command and stops until you add --trust-study
(--dry-run shows it, running nothing).

examples:
  autotune launch -- python train.py --epochs 10
  autotune launch --dry-run -- python train.py        what would run, per rank
  autotune launch --config launch.json -- python train.py --batch-size {batch_size}
  autotune launch --nproc-per-node 4 -- python train.py        override the tuned rank count
  autotune launch --nnodes 2 --node-rank 0 --master-addr host0 -- python train.py   (each host)
  autotune launch                                      the command the search tuned, as exported
  autotune launch --trust-study                        the same from a shared study, once read
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from ..config import describe_changes
from ..errors import ConfigError
from ..export.launch import (Nodes, default_log_dir, describe, from_manifest, from_study,
                      in_force_lines, override, plan_launch, program_for, refusals)
from ..clean import one_line, printable
from ._common import (STORED_COMMAND_HELP, add_idle_arg, add_study_args, add_trust_arg,
                      int_at_least, load_topology, open_study_from_args, storage_url)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_study_args(p)
    p.add_argument("--config", metavar="FILE",
                   help="a manifest from `autotune export --format json` instead of a study")
    p.add_argument("--force", action="store_true",
                   help="launch even when the configuration was measured on other hardware, "
                        "with another torch, or never verified")
    p.add_argument("--dry-run", action="store_true",
                   help="print each rank's environment and command; run nothing")
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
    from ..export.launch import exit_code
    from ..run.runner import free_port
    from ..run.attached import run_attached
    from ..script.template import check_command
    if args.check_seconds < 0:
        raise ConfigError(f"--check-seconds {args.check_seconds:g}: must be 0 (no check) or more")
    if args.config and args.storage:
        raise ConfigError("give either --config FILE or --storage URL, not both")
    if args.script is not None:
        check_command(args.script, None)
    nodes = None
    if args.nnodes > 1 or args.node_rank:
        if not args.master_addr:
            raise ConfigError(f"--nnodes {args.nnodes}: give --master-addr, the host of node "
                              "rank 0")
        nodes = Nodes(nnodes=args.nnodes, node_rank=args.node_rank, master_addr=args.master_addr,
                      master_port=args.master_port or 29500)
    tuned = from_manifest(args.config) if args.config else from_study(open_study_from_args(args)[0])
    if args.script is None and not args.dry_run:   # a dry run shows the command, runs nothing
        _check_trusted(args, tuned)
    topology = load_topology(None)
    problems = refusals(tuned, topology, topology.capabilities.torch_version)
    if problems and not args.force:
        raise ConfigError("; ".join(problems) + "; --force launches it anyway")
    for why in problems:
        _say(f"warning: {why} (--force)")
    config, notes = override(tuned.config, topology, nproc_per_node=args.nproc_per_node)
    program, more = program_for(tuned, args.script, config)
    base_env = dict(os.environ)
    log_dir = os.path.abspath(args.log_dir) if args.log_dir else default_log_dir(args.results)
    port = nodes.master_port if nodes else (args.master_port or free_port())
    scan = _scan(args.script, tuned)
    plan = plan_launch(config, topology, program, log_dir=log_dir, base_env=base_env, port=port,
                       nodes=nodes, local_rank_arg=scan.local_rank_arg)
    tuned_value = {"threads": "auto" if config.threads is None else config.threads}
    more += [f"{f.where} {f.what}: {f.knob}={tuned_value.get(f.knob, getattr(config, f.knob, '?'))}"
             f" will not act ({f.fix})" for f in scan.findings if f.overrides]
    for note in notes + more:
        _say(f"note: {note}")
    if nodes:
        first = nodes.node_rank * len(plan.ranks)
        _say(f"note: --nnodes {nodes.nnodes}: this host is node {nodes.node_rank} (ranks "
             f"{first}-{first + len(plan.ranks) - 1} of {nodes.nnodes * len(plan.ranks)}), "
             f"rendezvous {nodes.master_addr}:{nodes.master_port}")
    _say(f"launching {len(plan.ranks)} rank(s) with {describe_changes(config)} "
         f"from {tuned.source}" + (f" ({tuned.headline})" if tuned.headline else ""))
    if args.dry_run:
        print(printable(describe(plan, base_env)))
        return 0
    check = _InForce(plan, args.check_seconds)
    try:
        result = run_attached(plan, echo=sys.stdout, on_start=check.start, on_poll=check.poll,
                              idle_s=args.idle_timeout)
    finally:
        check.report()   # a run shorter than --check-seconds: what was seen before it ended
    for stuck in result.stuck:
        _say(f"warning: {stuck.message}; it counts as finished")
    code = exit_code(result.exit_codes, result.stopped_by_us,
                     ended=tuple(s.rank for s in result.stuck))
    codes = ", ".join(f"rank {r}: {c}" for r, c in enumerate(result.exit_codes))
    _say(f"{'done' if code == 0 else 'failed'} in {result.wall_seconds:.1f}s ({codes}); "
         f"logs in {log_dir}")
    return code


def _check_trusted(args: argparse.Namespace, tuned) -> None:
    """Without `--` the command comes from the study or manifest: data someone wrote, which
    runs only from a file only this user can write, or once the person says --trust-study."""
    from ..study.trust import check_stored_code, stored_code, storage_file
    path = os.path.abspath(args.config) if args.config else storage_file(storage_url(args))
    check_stored_code(stored_code(tuned.program, tuned.workload), tuned.source, path,
                      trusted=args.trust_study,
                      command_hint=", or give your own command after `--`")


_INTERVAL_S = 0.5   # one /proc walk per rank per interval, taken from the training's cores


def _scan(command, tuned):
    """What the script's own text overrides, and whether it takes --local-rank, as the search's
    script mode reads it (script/scan.py)."""
    from ..script.scan import ScriptScan, scan_command
    command = command if command is not None else tuned.program
    return scan_command(tuple(command)) if command else ScriptScan(path=None)


class _InForce:
    """The configuration checked from outside the ranks, as script-mode trials are checked
    (measure/observe.py): the user's script may set its own threads, affinity or LD_PRELOAD."""

    def __init__(self, plan, seconds: float) -> None:
        self.plan, self.seconds = plan, seconds
        self.sampler = None
        self.peeked = 0.0

    def start(self, pids: list[int]) -> None:
        if self.seconds > 0:
            from ..measure.observe import Sampler
            self.sampler = Sampler(pids, interval_s=_INTERVAL_S).start()

    def poll(self) -> None:
        # Counted in windows where every rank computed: start-up (imports, rendezvous) would
        # otherwise use up the watch before the thread pools exist.
        if self.sampler is None or time.monotonic() - self.peeked < 1.0:
            return
        self.peeked = time.monotonic()
        computed = min(o.num_windows for o in self.sampler.observations()) * _INTERVAL_S
        if computed >= self.seconds:
            self.report()

    def report(self) -> None:
        if self.sampler is None:
            return
        from ..measure.unacted import unacted_knobs
        observations, self.sampler = self.sampler.stop(), None
        if not any(o.num_windows for o in observations):
            _say("in force: not checked (no rank computed while watched)")
            return
        problems = unacted_knobs(self.plan.request.ranks, observations)
        for problem in problems:
            _say(f"warning: {problem}")
        _say("in force, seen from outside the ranks: " + (
            f"{len(problems)} planned knob(s) did not act" if problems else
            "every planned knob acted"))
        for line in in_force_lines(self.plan.request.ranks, observations):
            _say(f"  {line}")


def _say(text: str) -> None:
    # the headline and the source (a study name) come from the study: shown, never acted on
    print(f"autotune: {one_line(text)}", file=sys.stderr, flush=True)
