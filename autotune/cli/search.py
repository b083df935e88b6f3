"""Search for the fastest launch configuration of a workload on this machine, within a budget.

The search probes the machine, resolves the search space against it, measures two references
(the default launch and torch's run_cpu heuristic), then lets an Optuna sampler choose real,
timed DDP trials until the budget (less verification) is spent or the search stagnates. The best
few are then re-run interleaved with the default launch, and only a configuration that stays
faster is recommended. Everything is stored as it happens: Ctrl-C, or running the same command
again, resumes without re-running what was measured.

examples:
  autotune search --budget 30m
  autotune search --budget 10m --workload transformer --max-accuracy-drop 2
  autotune search --budget 1h --storage postgresql://me@db/autotune --space my_space.yaml
  autotune search --budget 10m --workload mypkg.train:build       your model (see README)
  autotune search --budget 30m --metric 'img/s: ([0-9.]+)' -- python train.py --bs {batch_size}
  autotune search --budget 1h --hosts node1:8,node2:8                  across machines (ssh)
  autotune search --budget 1h --hostfile hosts.txt --launcher mpirun   the same under Open MPI
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from ..budget import parse_budget, plan_budget
from ..errors import AutotuneError
from ..lock import MachineLock
from ..recommend import Recommendation, pick_candidates, unverified, verify
from ..runner import interrupt_on_sigterm, reap_orphans
from ..search import SearchOptions, make_sampler, run_search
from ..space import default_space_path, find_space, load_space, resolve
from ..study import (default_storage, describe_study, fail_stale_running, open_storage,
                     open_study, redact, study_name)
from ..trial import TrialSettings, live_evaluator
from ..script import placeholders, restrict_space
from ._common import (add_storage_arg, add_workload_args, check_workload_args, load_topology,
                      positive_float, save_recommendation)
from ._hosts import add_host_args, cluster_from_args
from ._progress import Progress


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--budget", default="30m", metavar="TIME",
                   help="wall-clock budget for the whole command, verification included: "
                        "90s, 30m, 1h30m (default: 30m)")
    add_workload_args(p, seconds_default=None)
    p.add_argument("--space", metavar="FILE",
                   help="search-space YAML (default: search_spaces/cpu.yaml, gpu.yaml with GPUs)")
    add_storage_arg(p)
    p.add_argument("--max-accuracy-drop", type=float, default=1.0, metavar="PP",
                   help="largest accuracy loss, in percentage points against the default launch, "
                        "a recommendation may have (default: 1.0)")
    p.add_argument("--seed", type=int, default=0, help="sampler seed (default: 0)")
    p.add_argument("--verify-rounds", type=int, default=3, metavar="N",
                   help="interleaved verification rounds (default: 3)")
    p.add_argument("--trial-timeout", type=positive_float, metavar="S",
                   help="kill a trial after this long (default: 4x the first trial, at least 30s)")
    p.add_argument("--allow-concurrent", action="store_true",
                   help="run even if another search holds this machine (timings will suffer)")
    add_host_args(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--quiet", action="store_true", help="print only the final summary")
    out.add_argument("--json", action="store_true", help="print one JSON object at the end")


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    budget_s = parse_budget(args.budget)
    bp = plan_budget(budget_s)
    if args.max_accuracy_drop < 0:
        raise AutotuneError(f"--max-accuracy-drop {args.max_accuracy_drop}: must be >= 0")
    if args.verify_rounds < 1:
        raise AutotuneError(f"--verify-rounds {args.verify_rounds}: must be at least 1")
    label = check_workload_args(args)
    cluster = cluster_from_args(args)
    # Across hosts every host has the same shape (probe_cluster refuses others): the first
    # host's probe stands for all in the space, the study name and the export.
    topology = cluster.topologies[0] if cluster else load_topology(None)
    space_path = find_space(args.space) if args.space else default_space_path(topology)
    space = resolve(load_space(space_path), topology)
    if cluster is not None:
        space = space.across(len(cluster.hosts))
    dropped: list[str] = []
    if args.script:
        space, dropped = restrict_space(space, placeholders(args.script))
    url = args.storage or default_storage(args.results)
    storage = open_storage(url)
    # A study across hosts is another study than one on the first host alone.
    name = study_name(label if cluster is None else f"{label}-{len(cluster.hosts)}hosts",
                      topology, space.name)
    progress = Progress(budget_s=budget_s, quiet=args.quiet or args.json, started=started)

    def elapsed() -> float:
        return time.monotonic() - started

    settings = TrialSettings(workload=args.workload, target_seconds=args.seconds or bp.target_seconds,
                             results_dir=args.results, command=args.script, metric=args.metric,
                             timeout_s=args.trial_timeout or max(30.0, budget_s / 4),
                             cluster=cluster)
    lock = None if args.allow_concurrent else MachineLock(topology.fingerprint()).acquire()
    try:
        with interrupt_on_sigterm():
            study = open_study(storage, name, sampler=make_sampler(args.seed))
            # A search killed with kill -9 leaves its ranks running and its trial RUNNING.
            reap_orphans(os.path.join(args.results, "trials"))
            stale = fail_stale_running(study)
            describe_study(study, topology=topology, workload=label,
                           space=space.to_json(), settings={
                               "target_seconds": settings.target_seconds,
                               "max_accuracy_drop": args.max_accuracy_drop})
            if cluster is not None:
                from ..multinode import cluster_to_json
                study.set_user_attr("cluster", cluster_to_json(cluster))
            progress.start(name=name, storage=redact(url), space=space, stale=stale,
                           topology=topology)
            if args.script:
                # export fills this template with the tuned values
                study.set_user_attr("script_command", list(args.script))
                study.set_user_attr("script_metric", args.metric)
                _script_notes(progress, args, dropped)
            evaluate = live_evaluator(topology, settings,
                                      time_left=lambda: budget_s - elapsed() - 2.0,
                                      adapt_timeout=args.trial_timeout is None)

            class _Clock:
                def elapsed(self) -> float:
                    return elapsed()

            options = SearchOptions(budget_s=budget_s, verify_reserve_s=bp.verify_reserve_s,
                                    min_trial_s=bp.min_trial_s, verify_rounds=args.verify_rounds,
                                    max_accuracy_drop=args.max_accuracy_drop, seed=args.seed,
                                    reported_accuracy=args.script is not None)
            result = run_search(study, space=space, topology=topology, evaluate=evaluate,
                                clock=_Clock(), options=options, on_event=progress.event)
            rec = _recommend(result, evaluate, args, lambda: budget_s - elapsed() - 2.0, progress)
            command = save_recommendation(study, rec, topology, label, command=args.script,
                                          cluster=cluster)
    except KeyboardInterrupt as exc:
        print(f"\nautotune: {str(exc) or 'interrupted'}; completed trials are kept in {redact(url)}. "
              "Run the same command to resume.", file=sys.stderr)
        return 130
    finally:
        if lock is not None:
            lock.release()
    summary = {"study": name, "storage": redact(url), "stop_reason": result.stop_reason,
               "trials_run": result.measured, "elapsed_s": round(elapsed(), 1),
               "budget_s": budget_s, "recommendation": rec.to_json() if rec else None,
               "command": command}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        progress.finish(result, rec, command, elapsed())
    return 0


def _script_notes(progress, args, dropped: list[str]) -> None:
    if args.metric:
        progress.note(f"metric: autotune.report() if the script calls it, else the median of "
                      f"--metric {args.metric!r} over rank 0's output")
    else:
        progress.note("metric: autotune.report() if the script calls it; otherwise each trial is "
                      "scored by work per second of wall time for the whole run, start-up "
                      "included -- the WEAKEST measure (valid only for a fixed amount of work); "
                      "pass --metric REGEX or call autotune.report() for a real throughput")
    if dropped:
        progress.note(f"not tuned (the command has no placeholder for them): {', '.join(dropped)}")


def _recommend(result, evaluate, args, time_left, progress) -> Recommendation | None:
    default = result.default
    if default is None or not default.throughput:
        progress.note("no recommendation: the default launch has no measurement to compare with")
        return None
    candidates = pick_candidates(result.records)
    if not candidates:
        return verify([], default, evaluate, rounds=0)
    if time_left() < 20:
        return unverified(candidates[0], default, "no budget left to verify")
    progress.note(f"verifying {len(candidates)} candidate(s) against the default launch, "
                  f"interleaved, up to {args.verify_rounds} rounds")
    return verify(candidates, default, evaluate, rounds=args.verify_rounds, time_left=time_left,
                  on_event=progress.event)

