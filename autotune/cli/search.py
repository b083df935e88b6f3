"""Search for the fastest launch configuration of a workload on this machine, within a budget.

The search probes the machine, resolves the search space against it, measures two references
(the default launch and torch's run_cpu heuristic), then lets an Optuna sampler choose real,
timed DDP trials until the budget (less verification) is spent or the search stagnates. The best
few are then re-run interleaved with the default launch, and only a configuration that stays
faster is recommended. Everything is stored as it happens: Ctrl-C, or running the same command
again, resumes without re-running what was measured. Several machines running the same command
with one `--storage postgresql://...` share the study: each configuration runs on one of them,
and the last to finish verifies and writes the recommendation for all.

examples:
  autotune search --budget 30m
  autotune search --budget 10m --workload transformer --max-accuracy-drop 2
  autotune search --budget 1h --storage postgresql://me@db/autotune --space my_space.yaml
      (the same command on several identical machines: one shared search; pip install
      'autotune[postgres]' for the driver)
  autotune search --budget 10m --workload mypkg.train:build       your model (see README)
  autotune search --budget 30m --metric 'img/s: ([0-9.]+)' -- python train.py --bs {batch_size}
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

from ..budget import parse_budget, plan_budget
from ..errors import AutotuneError
from ..lock import MachineLock
from ..recommend import Recommendation, pick_candidates, unverified, verify
from ..runner import interrupt_on_sigterm, reap_orphans
from ..search import DEFAULT_ROLE, SearchOptions, make_sampler, run_search
from ..shared import StudyLock, Workers
from ..space import default_space_path, find_space, load_space, resolve
from ..study import (default_storage, describe_study, fail_stale_running, open_storage,
                     open_study, records, redact, study_name)
from ..trial import TrialSettings, live_evaluator
from ..script import placeholders, restrict_space
from ._common import (add_storage_arg, add_workload_args, check_workload_args, load_topology,
                      positive_float, save_recommendation)
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
    topology = load_topology(None)
    space_path = find_space(args.space) if args.space else default_space_path(topology)
    space = resolve(load_space(space_path), topology)
    label = check_workload_args(args)
    dropped: list[str] = []
    if args.script:
        space, dropped = restrict_space(space, placeholders(args.script))
    url = args.storage or default_storage(args.results)
    storage = open_storage(url)
    name = study_name(label, topology, space.name)
    progress = Progress(budget_s=budget_s, quiet=args.quiet or args.json, started=started)

    def elapsed() -> float:
        return time.monotonic() - started

    settings = TrialSettings(workload=args.workload, target_seconds=args.seconds or bp.target_seconds,
                             results_dir=args.results, command=args.script, metric=args.metric,
                             timeout_s=args.trial_timeout or max(30.0, budget_s / 4))
    lock = None if args.allow_concurrent else MachineLock(topology.fingerprint()).acquire()
    # Shared: other searches may use this study at once (a database server, or --allow-concurrent
    # on a file); then configurations are claimed through the study and one worker verifies.
    shared = args.allow_concurrent or not url.startswith(("sqlite:", "journal:"))
    study_lock = workers = stored = None
    try:
        with interrupt_on_sigterm():
            study = open_study(storage, name, sampler=make_sampler(args.seed))
            if shared:
                study_lock = StudyLock(url, name)
                workers = Workers(study, study_lock, budget_s=budget_s)
                others = workers.join()
                if others:  # the same seed would make every worker propose the same trials
                    study = open_study(storage, name, sampler=make_sampler(args.seed + others))
            # A search killed with kill -9 leaves its ranks running and its trial RUNNING.
            reap_orphans(os.path.join(args.results, "trials"))
            stale = fail_stale_running(study)
            describe_study(study, topology=topology, workload=label,
                           space=space.to_json(), settings={
                               "target_seconds": settings.target_seconds,
                               "max_accuracy_drop": args.max_accuracy_drop})
            progress.start(name=name, storage=redact(url), space=space, stale=stale,
                           topology=topology)
            if workers is not None:
                progress.note(f"shared search (worker {workers.id}, {others} other(s) searching): "
                              "configurations are claimed through the study; the last worker to "
                              "finish verifies for all")
                if not study_lock.atomic:
                    progress.note("this storage has no lock autotune can take (PostgreSQL and "
                                  "file storages have): workers may both run a configuration")
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
                                clock=_Clock(), options=options, on_event=progress.event,
                                lock=study_lock, deadline=workers and workers.deadline)
            time_left = lambda: budget_s - elapsed() - 2.0  # noqa: E731
            if workers is None:
                rec = _recommend(result, evaluate, args, time_left, progress)
                command = save_recommendation(study, rec, topology, label, command=args.script)
            else:
                rec, stored = _shared_recommend(workers, study, result, evaluate, args,
                                                time_left, progress)
                command = (save_recommendation(study, rec, topology, label, command=args.script)
                           if stored is None else stored.get("command"))
                if stored is None:
                    workers.verified()
    except KeyboardInterrupt as exc:
        print(f"\nautotune: {str(exc) or 'interrupted'}; completed trials are kept in {redact(url)}. "
              "Run the same command to resume.", file=sys.stderr)
        return 130
    finally:
        if workers is not None:
            workers.verified("abandoned")  # no-op unless this worker was cut off verifying
        if study_lock is not None:
            study_lock.close()
        if lock is not None:
            lock.release()
    summary = {"study": name, "storage": redact(url), "stop_reason": result.stop_reason,
               "trials_run": result.measured, "elapsed_s": round(elapsed(), 1),
               "budget_s": budget_s, "recommendation": rec.to_json() if rec else None,
               "command": command}
    if workers is not None:
        summary["worker"] = workers.id
        summary["verified_here"] = stored is None
        if stored is not None:
            summary["recommendation"] = {k: v for k, v in stored.items() if k != "command"} or None
    if args.json:
        print(json.dumps(summary, indent=2))
    elif stored is not None:
        progress.finish(result, None, None, elapsed(), stored=stored)
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


def _shared_recommend(workers: Workers, study, result, evaluate, args, time_left, progress):
    """(recommendation, None) when this worker verified, over every worker's measurements;
    (None, stored) when another worker verified for it, after waiting with progress."""
    shown, last_note = "", 0.0
    while True:
        what, detail = workers.turn()
        if what == "verify":
            fresh = [r for r in records(study) if r.role != "repeat"]
            default = next((r for r in fresh if r.role == DEFAULT_ROLE), result.default)
            everyone = dataclasses.replace(result, records=fresh, default=default)
            return _recommend(everyone, evaluate, args, time_left, progress), None
        if what == "read":
            return None, detail
        if detail != shown or time.monotonic() - last_note > 30:
            progress.note(f"waiting for the shared recommendation: {detail}")
            shown, last_note = detail, time.monotonic()
        time.sleep(2.0)


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

