"""Search for the fastest launch configuration of a workload on this machine, within a budget.

The search probes the machine, resolves the search space against it, measures the references
(the default launch, the settings torch's run_cpu would choose, reproduced by autotune, and,
where the space offers compile, the default launch compiled), then
lets an Optuna sampler choose real, timed DDP trials until the budget (less verification) is
spent or the search stagnates. The best few are then re-run interleaved with the default
launch, and only a configuration that stays faster is recommended; where one compiles, the
winner is the one that finishes --run-length of training first, its compile included. Everything
is stored as it happens: Ctrl-C, or running the same command
again, resumes without re-running what was measured. Several machines running the same command
with one `--storage postgresql://...` share the study: each configuration runs on one of them,
and the last to finish verifies and writes the recommendation for all.

Progress goes to stderr: at a terminal, a live bar (budget and ETA, phase, trial number, best so
far against the default launch, what runs now) under the per-trial lines; piped or in CI (CI
set), the per-trial lines alone; with --quiet, only warnings and the final summary.

examples:
  autotune search --budget 30m
  autotune search --budget 10m --workload transformer --max-accuracy-drop 2
  autotune search --budget 30m --run-length 5000steps      weigh a compile against your run
  autotune search --budget 1h --storage postgresql://me@db/autotune --space my_space.yaml
      (the same command on several identical machines: one shared search; pip install
      'psycopg[binary]' for the driver)
  autotune search --budget 10m --workload mypkg.train:build       your model (see docs/scripts.md)
  autotune search --budget 30m --metric 'img/s: ([0-9.]+)' -- python train.py --bs {batch_size}
  autotune search --budget 10m --metric 'Training time: ([0-9.]+)' --lower-is-better \
      --accuracy 'Test accuracy: ([0-9.]+)%' -- python train.py
  autotune search --budget 1h --hosts node1:8,node2:8                  across machines (ssh)
  autotune search --budget 1h --hostfile hosts.txt --launcher mpirun   the same under Open MPI
  salloc -N2 --exclusive autotune search --budget 1h    in a SLURM allocation: every node, trials
      by `srun --overlap` (one search: started by srun, the tasks but task 0 exit at once)
  sudo autotune search --budget 30m --quiet-numa      numa_balancing off while trials are timed
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from ..display import TerminalProgress
from ..tune import (DEFAULT_KEEP_TRIALS, GUIDES, SearchRequest, parse_budget, parse_run_length,
                    redact, search)
from ._common import RUN_LENGTH_HELP
from ._common import (ACCURACY_HELP, add_storage_arg, add_switch, add_workload_args, int_at_least,
                      percentage_points, positive_float, script_of)
from ._hosts import add_host_args, hosts_of, only_task_zero


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--budget", default="30m", metavar="TIME",
                   help="wall-clock budget for the whole command, verification included: "
                        "90s, 30m, 1h30m (default: 30m). When the first trial shows it cannot "
                        "cover the noise floor, a few trials and verification, a warning says "
                        "so and how long to use (\"4m is too short here: ...; use at least "
                        "7m\"); the search goes on, and the same command with a longer budget "
                        "resumes what it measured. It samples until what verification will "
                        "need, predicted from its own runs (a window of a launch kept running, "
                        "a start where none is), is due; below what one trial and one "
                        "verification round need (60s, more when a resumed study measured a "
                        "slower default launch) it refuses, naming the least")
    p.add_argument("--run-length", default=None, metavar="TIME|Nsteps", help=RUN_LENGTH_HELP)
    add_workload_args(p, seconds_default=None)
    p.add_argument("--space", metavar="FILE",
                   help="search-space YAML (default: search_spaces/cpu.yaml, gpu.yaml with GPUs)")
    add_storage_arg(p)
    _add_quality_args(p)
    _add_search_args(p)
    add_switch(p, "--allow-concurrent",
               "run even if another search holds this machine (timings will suffer)")
    add_switch(p, "--quiet-numa",
               "root only: turn the kernel's automatic NUMA balancing "
               "(kernel.numa_balancing) off for the search, so that pages do not move "
               "between nodes while trials are timed, and put it back afterwards, also "
               "after Ctrl-C, SIGTERM or a crash (the next search restores it). Without "
               "it the search says when numa_balancing may disturb its timings")
    add_host_args(p)
    add_switch(p, "--quiet", "print only the final summary (no per-trial lines, no live bar)")
    add_switch(p, "--json", "print one JSON object on stdout at the end; the progress stays on "
               "stderr (a long search is not silent), unless --quiet")


def _add_quality_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-accuracy-drop", type=percentage_points, default=1.0, metavar="PP",
                   help="largest accuracy loss, in percentage points against the default launch, "
                        "a recommendation may have (0 to below 100; default: 1.0). A class that "
                        "changes the math is accepted only when its runs show it: the one-sided "
                        "95%% upper bound of its drop, paired seed by seed with the default "
                        "launch's runs, is at most this. A class whose runs cannot tell is 'not "
                        "shown' and is not recommended as keeping accuracy; the summary names it "
                        "with what settling it costs")
    p.add_argument("--quality-seeds", type=int, default=3, metavar="N",
                   help="seeds per quality measurement; the default launch's give the noise "
                        "floor (default: 3, at least 2)")
    p.add_argument("--quality-samples", type=int, default=None, metavar="N",
                   help="training samples per quality run (default: 16384 for the built-in cnn, "
                        "chosen from measurements: see docs/benchmarks.md)")
    p.add_argument("--accuracy", metavar="REGEX", help=ACCURACY_HELP + "; held to "
                   "--max-accuracy-drop against the default launch. A script that takes a seed "
                   "({seed} in the command, or $AUTOTUNE_SEED read by the script) is first run "
                   "on the default launch with each of --quality-seeds seeds: their spread is "
                   "the gate's noise floor; without a seed the gate compares single runs")


def _add_search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=0, help="sampler seed (default: 0)")
    p.add_argument("--max-trials", type=int_at_least(1), metavar="N",
                   help="stop the search after N measured trials (references included), "
                        "then verify")
    p.add_argument("--verify-rounds", type=int, default=3, metavar="N",
                   help="interleaved verification rounds, at least; more (up to 4x) while the "
                        "speedup's 95%% interval is wider than ±10%% and the budget allows. A "
                        "speedup that does not settle is headlined by its one-sided 95%% lower "
                        "bound when that reaches 1.02x, else as unsettled, with what other "
                        "processes took of the cores (default: 3)")
    p.add_argument("--max-verify-rounds", type=int_at_least(1), metavar="N",
                   help="stop verifying after N rounds even when the speedup is unsettled "
                        "(default: 4x --verify-rounds; N = --verify-rounds gives exactly that many)")
    p.add_argument("--guide", choices=GUIDES, default="descent",
                   help="what proposes trials before the sampler's model: 'descent' measures "
                        "the launch the hardware points to right after the two references, then "
                        "changes one knob at a time around the fastest so far; 'guess' only the "
                        "first; 'none' starts from random draws (default: descent; "
                        "docs/search-at-scale.md compares them)")
    p.add_argument("--no-early-stop", dest="early_stop", action="store_false",
                   help="run every trial's whole timed window; by default a built-in workload's "
                        "trial that is clearly below 95%% of the leader after 2 of its windows, "
                        "beyond the noise, stops there and is recorded as stopped early (never "
                        "recommended). Scripts time themselves and always run whole")
    p.add_argument("--trial-timeout", type=positive_float, metavar="S",
                   help="kill a trial after this long (default: 4x the first trial, at least 30s)")
    p.add_argument("--keep-trials", type=keep_trials, default=DEFAULT_KEEP_TRIALS,
                   metavar="all|N",
                   help="trial folders (logs, results) kept under --results/trials: at the "
                        "start the oldest beyond the newest N are removed, never one a running "
                        f"trial uses; 'all' keeps every one (default: {DEFAULT_KEEP_TRIALS})")


def keep_trials(text: str) -> int | None:
    """--keep-trials: 'all' (None) or a count of at least 1."""
    if text.strip().lower() == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give 'all' or a number of trial folders")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: keep at least 1 trial folder (or 'all')")
    return value


def run_length_of(args: argparse.Namespace) -> dict:
    """SearchRequest's run_length from --run-length (absent: the request's default)."""
    return {} if args.run_length is None else {"run_length": parse_run_length(args.run_length)}


def run(args: argparse.Namespace) -> int:
    if not only_task_zero("search"):
        return 0
    started = time.monotonic()
    req = SearchRequest(budget_s=parse_budget(args.budget), workload=args.workload,
                        **run_length_of(args),
                        script=script_of(args), seconds=args.seconds, results=args.results,
                        storage=args.storage, space=args.space,
                        max_accuracy_drop=args.max_accuracy_drop,
                        quality_seeds=args.quality_seeds, quality_samples=args.quality_samples,
                        seed=args.seed, max_trials=args.max_trials,
                        verify_rounds=args.verify_rounds, max_verify_rounds=args.max_verify_rounds,
                        trial_timeout=args.trial_timeout,
                        allow_concurrent=args.allow_concurrent, idle_timeout=args.idle_timeout,
                        guide=args.guide, early_stop=args.early_stop,
                        keep_trials=args.keep_trials, hosts=hosts_of(args),
                        quiet_numa=args.quiet_numa)
    progress = TerminalProgress(budget_s=req.budget_s, quiet=args.quiet, started=started)
    try:
        with progress:   # at a terminal, the live bar runs from the probe to the verdict
            tuned = search(req, progress=progress, started=started,
                           say=lambda line: print(line, file=sys.stderr))
    except KeyboardInterrupt as exc:
        print(f"\nautotune: {str(exc) or 'interrupted'}; completed trials are kept in "
              f"{redact(req.url)}. Run the same command to resume.", file=sys.stderr)
        return 130
    elapsed = time.monotonic() - started
    if args.json:
        print(json.dumps(tuned.summary, indent=2))
    elif tuned.stored is not None:
        progress.finish(tuned.result, None, None, elapsed, stored=tuned.stored)
    else:
        progress.finish(tuned.result, tuned.recommendation, tuned.command, elapsed,
                        overridden=tuned.overridden, summary=tuned.summary)
    return 0
