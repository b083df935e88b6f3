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
  autotune search --budget 10m --metric 'Training time: ([0-9.]+)' --lower-is-better \
      --accuracy 'Test accuracy: ([0-9.]+)%' -- python train.py
  autotune search --budget 1h --hosts node1:8,node2:8                  across machines (ssh)
  autotune search --budget 1h --hostfile hosts.txt --launcher mpirun   the same under Open MPI
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time


from ..search.budget import parse_budget, plan_budget
from ..config import Config
from ..study.evidence import stored_classes
from ..errors import AutotuneError
from ..search.lock import MachineLock
from ..measure.stats import BUSY_CPU_SHARE
from ..recommend.verify import (Recommendation, confirm_quality, pick_candidates, trusted_alone,
                         unverified, verify)
from ..run.runner import interrupt_on_sigterm, reap_orphans
from ..search.loop import run_search
from ..search.options import SearchOptions
from ..search.references import make_sampler
from ..study.records import DEFAULT_ROLE, REPEAT_ROLE
from ..search.shared import StudyLock, Workers
from ..space.resolve import default_space_path, find_space, load_space, resolve
from ..probe import torch_build
from ..study.provenance import Here, check_resumable, not_used
from ..study.storage import (default_storage, describe_study, fail_stale_running, open_storage, open_study, redact, study_name)
from ..study.records import records
from ..run.trial import TrialSettings, live_evaluator
from ..worker.workloads import QUALITY_SAMPLES, quality_facts
from ..measure.script import placeholders, restrict_space
from ..measure.script_scan import scan_command
from ._common import (ACCURACY_HELP, accuracy_pattern, add_storage_arg, add_workload_args,
                      check_workload_args, int_at_least, load_topology, positive_float,
                      save_recommendation, script_settings)
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
                        "a recommendation may have; a configuration is rejected only when its "
                        "loss exceeds this by more than the seed-to-seed noise (default: 1.0)")
    p.add_argument("--quality-seeds", type=int, default=3, metavar="N",
                   help="seeds per quality measurement; the default launch's give the noise "
                        "floor (default: 3, at least 2)")
    p.add_argument("--quality-samples", type=int, default=None, metavar="N",
                   help="training samples per quality run (default: 16384 for the built-in cnn, "
                        "chosen from measurements: see README, Quality evidence)")
    p.add_argument("--accuracy", metavar="REGEX", help=ACCURACY_HELP + "; held to "
                   "--max-accuracy-drop against the default launch")
    p.add_argument("--seed", type=int, default=0, help="sampler seed (default: 0)")
    p.add_argument("--max-trials", type=int_at_least(1), metavar="N",
                   help="stop the search after N measured trials (references included), "
                        "then verify")
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
    if not math.isfinite(args.max_accuracy_drop) or args.max_accuracy_drop < 0:
        raise AutotuneError(f"--max-accuracy-drop {args.max_accuracy_drop}: must be a number "
                            ">= 0 (percentage points)")
    if args.quality_seeds < 2:
        raise AutotuneError(f"--quality-seeds {args.quality_seeds}: at least 2 seeds are needed "
                            "to measure the noise")
    if args.quality_samples is not None and args.quality_samples < 1:
        raise AutotuneError(f"--quality-samples {args.quality_samples}: must be positive")
    if args.verify_rounds < 1:
        raise AutotuneError(f"--verify-rounds {args.verify_rounds}: must be at least 1")
    label = check_workload_args(args)
    cluster = cluster_from_args(args)
    # Across hosts every host has the same shape (probe_cluster refuses others): the first
    # host's probe stands for all in the space, the study name and the export.
    topology = cluster.topologies[0] if cluster else load_topology(None)
    space_path = find_space(args.space) if args.space else default_space_path(topology)
    space = resolve(load_space(space_path), topology)
    batchnorm, quality_samples = (True, QUALITY_SAMPLES) if args.script else \
        quality_facts(args.workload)
    if cluster is not None:
        space = space.across(len(cluster.hosts))
    dropped: list[str] = []
    if args.script:
        space, dropped = restrict_space(space, placeholders(args.script))
    url = args.storage or default_storage(args.results)
    storage = open_storage(url, create_under=args.results)
    here = Here(topology=topology, torch=torch_build())
    # A study across hosts is another study than one on the first host alone.
    name = study_name(label if cluster is None else f"{label}-{len(cluster.hosts)}hosts",
                      topology, space.name, torch=here.torch)
    progress = Progress(budget_s=budget_s, quiet=args.quiet or args.json, started=started)

    def elapsed() -> float:
        return time.monotonic() - started

    settings = TrialSettings(**script_settings(args), workload=args.workload,
                             target_seconds=args.seconds or bp.target_seconds,
                             results_dir=args.results,
                             timeout_s=args.trial_timeout or max(30.0, budget_s / 4),
                             accuracy_samples=args.quality_samples or quality_samples,
                             cluster=cluster)
    scan = scan_command(args.script) if args.script else None
    lock = None if args.allow_concurrent else MachineLock(topology.fingerprint()).acquire()
    # Shared: other searches may use this study at once (a database server, or --allow-concurrent
    # on a file); then configurations are claimed through the study and one worker verifies.
    shared = args.allow_concurrent or not url.startswith(("sqlite:", "journal:"))
    study_lock = workers = stored = None
    try:
        with interrupt_on_sigterm():
            study = open_study(storage, name, sampler=make_sampler(args.seed))
            check_resumable(study, here)
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
                               "max_accuracy_drop": args.max_accuracy_drop,
                               "quality_samples": settings.accuracy_samples,
                               "quality_seeds": args.quality_seeds, "batchnorm": batchnorm,
                               "reference_batch": Config().global_batch}, torch=here.torch)
            if cluster is not None:
                from ..plan.cluster import cluster_to_json
                study.set_user_attr("cluster", cluster_to_json(cluster))
            progress.start(name=name, storage=redact(url), space=space, stale=stale,
                           topology=topology)
            elsewhere = _not_resumed(progress, storage, here, label, space.name)
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
                study.set_user_attr("script_lower_is_better", args.lower_is_better)
                study.set_user_attr("script_accuracy", accuracy_pattern(args))
                study.set_user_attr("script_scan", scan.to_json())
                study.set_user_attr("script_warning", scan.warning())
                _script_notes(progress, args, dropped, scan)
            evaluate = live_evaluator(topology, settings,
                                      time_left=lambda: budget_s - elapsed() - 2.0,
                                      adapt_timeout=args.trial_timeout is None)

            class _Clock:
                def elapsed(self) -> float:
                    return elapsed()

            options = SearchOptions(budget_s=budget_s, verify_reserve_s=bp.verify_reserve_s,
                                    min_trial_s=bp.min_trial_s, verify_rounds=args.verify_rounds,
                                    max_accuracy_drop=args.max_accuracy_drop, seed=args.seed,
                                    max_trials=args.max_trials,
                                    reported_accuracy=args.script is not None,
                                    accuracy_required=accuracy_pattern(args) is not None,
                                    overridden=held_from_scan(scan),
                                    batchnorm=batchnorm,
                                    quality_seeds=tuple(range(args.quality_seeds)),
                                    quality_samples=settings.accuracy_samples)
            result = run_search(study, space=space, topology=topology, evaluate=evaluate,
                                clock=_Clock(), options=options, on_event=progress.event,
                                lock=study_lock, deadline=workers and workers.deadline)
            time_left = lambda: budget_s - elapsed() - 2.0  # noqa: E731
            if workers is None:
                rec = _recommend(result, evaluate, args, time_left, progress,
                                 settings.accuracy_samples)
                command = save_recommendation(study, rec, topology, label, command=args.script,
                                              cluster=cluster)
            else:
                rec, stored = _shared_recommend(workers, study, result, evaluate, args,
                                                time_left, progress, settings.accuracy_samples)
                command = (save_recommendation(study, rec, topology, label, command=args.script,
                                               cluster=cluster)
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
               "command": command, "not_resumed": elsewhere,
               "overridden_by_script": dict(study.user_attrs.get("script_overrides") or {})}
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
        from ..search.loop import OVERRIDES_ATTR
        progress.finish(result, rec, command, elapsed(),
                        overridden=study.user_attrs.get(OVERRIDES_ATTR) if args.script else None)
    return 0


def _not_resumed(progress, storage, here: Here, label: str, space_name: str) -> list[dict]:
    """Studies of this job measured on other hardware or with another torch stay in the storage
    but are never resumed: say which, and why, so nobody wonders where their trials went."""
    import optuna
    summaries = optuna.get_all_study_summaries(storage, include_best_trial=False)
    listed = not_used(summaries, here, workload=label, space=space_name)
    for other, reason in listed:
        progress.note(f"not resumed: study {other} ({reason})")
    return [{"study": other, "reason": reason} for other, reason in listed]


def held_from_scan(scan) -> dict[str, str]:
    """Knobs the static scan alone decides: those no process shows from outside (KMP_* settings)
    and the rank count of a script that starts its own workers."""
    if scan is None:
        return {}
    return {f.knob: f"{f.where} {f.what}" for f in scan.findings
            if f.overrides and f.knob in ("kmp_affinity", "kmp_blocktime", "nproc")}


def _script_notes(progress, args, dropped: list[str], scan) -> None:
    if scan is not None and scan.warning():
        # One warning, before the first trial; stored so `report` and the dashboard show it.
        progress.warn(scan.warning())
    if scan is not None and scan.self_launching:
        progress.note("the script starts its own workers: autotune launches it once (nproc=1) "
                      "and tunes the environment, binding and libraries its workers inherit")
    if args.metric:
        order = "lower is better: a time or a loss" if args.lower_is_better else "higher is better"
        progress.note(f"metric: autotune.report() if the script calls it, else the median of "
                      f"--metric {args.metric!r} over rank 0's output ({order})")
    else:
        progress.note("metric: autotune.report() if the script calls it; otherwise each trial is "
                      "scored by its wall time for the whole run, start-up included, printed in "
                      "seconds per run -- the WEAKEST measure (valid only for a fixed amount of "
                      "work); pass --metric REGEX or call autotune.report() for a real throughput")
    if accuracy_pattern(args):
        progress.note(f"accuracy: the last match of --accuracy {accuracy_pattern(args)!r}, held to "
                      f"--max-accuracy-drop {args.max_accuracy_drop} points")
    if dropped:
        progress.note(f"not tuned (the command has no placeholder for them): {', '.join(dropped)}")


def _shared_recommend(workers: Workers, study, result, evaluate, args, time_left, progress,
                      quality_samples: int):
    """(recommendation, None) when this worker verified, over every worker's measurements;
    (None, stored) when another worker verified for it, after waiting with progress."""
    shown, last_note = "", 0.0
    while True:
        what, detail = workers.turn()
        if what == "verify":
            fresh = [_judged(r, result.book, args) for r in records(study) if r.role != REPEAT_ROLE]
            default = next((r for r in fresh if r.role == DEFAULT_ROLE), result.default)
            everyone = dataclasses.replace(result, records=fresh, default=default)
            return _recommend(everyone, evaluate, args, time_left, progress,
                              quality_samples), None
        if what == "read":
            return None, detail
        if detail != shown or time.monotonic() - last_note > 30:
            progress.note(f"waiting for the shared recommendation: {detail}")
            shown, last_note = detail, time.monotonic()
        time.sleep(2.0)


def _judged(r, book, args):
    """A stored trial with its quality judged on all the evidence now in the study (another
    worker may have measured its class since it was recorded)."""
    if book is None or args.script or r.outcome != "ok":
        return r
    book.classes.update(stored_classes(book.study.user_attrs))
    verdict = book.verdict(r.config)
    return dataclasses.replace(r, feasible=r.feasible and verdict is not None
                               and not verdict.reject)


def _recommend(result, evaluate, args, time_left, progress,
               quality_samples: int) -> Recommendation | None:
    default = result.default
    if default is None or not default.throughput:
        progress.note("no recommendation: the default launch has no measurement to compare with")
        return None
    candidates = pick_candidates(result.records)
    if not candidates:
        return verify([], default, evaluate, rounds=0)
    if time_left() < 20:
        alone = [c for c in candidates if trusted_alone(c)]
        if not alone:
            progress.note("no recommendation: no budget left to verify, and the best candidates "
                          "were measured while the machine was busy (cpu_share below "
                          f"{BUSY_CPU_SHARE}); run the same command again to verify them")
            return None
        return unverified(alone[0], default, "no budget left to verify")
    progress.note(f"verifying {len(candidates)} candidate(s) against the default launch, "
                  f"interleaved, up to {args.verify_rounds} rounds")
    book = result.book if not args.script else None
    accept = None
    if book is not None:
        # Keep time for the seeded confirmation of a winner that changes the math.
        answers: dict[str, tuple[bool, str]] = {}   # one confirmation per math class

        def accept(config):
            cls = book.class_of(config)
            if cls not in answers:
                answers[cls] = confirm_quality(book, config, time_left=time_left,
                                               samples=quality_samples, on_event=progress.event)
            return answers[cls]
    rec = verify(candidates, default, evaluate, rounds=args.verify_rounds, time_left=time_left,
                 on_event=progress.event, accept=accept)
    if book is not None and book.default_sample() is not None:
        d = book.default_sample()
        rec = dataclasses.replace(rec, extra={**rec.extra, "noise_floor":
                                  f"default launch quality {d.describe()} over {d.n} seeds"})
    return rec

