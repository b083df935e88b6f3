"""`autotune search` composed once: probe -> space -> study -> search -> recommend -> export.

`search(SearchRequest(...))` runs a whole search and returns what it found; the CLI only parses
arguments into a SearchRequest, calls this and prints. Tests drive whole searches through it
without argparse. Progress is reported to a `progress.Progress` (silent by default; the CLI
passes its terminal display).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from typing import Callable

import optuna

from ..export.recommendation import save_recommendation
from ..plan.cluster import Cluster
from ..util.private_files import foreign_folder
from ..probe.topology import Topology
from ..progress import SILENT, Progress
from ..recommend.choose import recommend, shared_recommendation
from ..recommend.recommendation import Recommendation
from ..reporting.diagnosis import diagnosis_lines
from ..result import Evaluate
from ..run.numa_quiet import QuietNuma, disturbs, restore_stale
from ..run.runner import interrupt_on_sigterm, reap_orphans
from ..run.evaluate import live_evaluator
from ..run.trials_dir import check_results, settle as settle_trials
from ..search.lock import MachineLock, machine_key
from ..search.loop import run_search
from ..search.account import Account, Accounted
from ..search.options import Clock, SearchResult
from .search_next import settle_words, unused_words, what_next
from ..recommend.rounds import round_limit
from ..search.shared import Workers
from ..study import attrs as A
from ..study.owners import fail_stale_running
from ..study.storage import open_storage, redact
from .common import Say, quiet
from .search_job import SearchJob, prepare, search_options
from .search_request import MonotonicClock, SearchRequest, Tuned
from .search_study import announce, describe, open_search_study, record_script


def search(req: SearchRequest, *, label: str | None = None, topology: Topology | None = None,
           cluster: Cluster | None = None, progress: Progress = SILENT,
           started: float | None = None, evaluate: Evaluate | None = None,
           clock: Clock | None = None, say: Say = quiet) -> Tuned:
    """One whole search: probe (unless `topology` is given), resolve the space, open or resume
    the study, measure the references and the sampler's trials within the budget, verify and
    store the recommendation with its launch command. `label` (from check_workload) names the
    study; `cluster` spreads trials over hosts probed beforehand (else the hosts `req.hosts` asks
    for are probed, saying so through `say`). KeyboardInterrupt propagates
    after the study is left consistent (completed trials kept, the running one interrupted).

    `evaluate` measures a configuration (`run.trial.Evaluate`); None: real trials
    (`live_evaluator`). `clock` (an object with `elapsed()`) spends the budget; None: the wall
    clock since `started`. A replay of a recorded landscape passes both and runs in seconds."""
    clock = clock if clock is not None else MonotonicClock(started)
    if evaluate is None:   # real trials: their folders must be the user's alone (before anything)
        check_results(req.results)
    job = prepare(req, label=label, topology=topology, cluster=cluster, say=say)
    time_left = functools.partial(_time_left, req.budget_s, clock)
    evaluate_is_live = evaluate is None
    if evaluate is None:
        evaluate = live_evaluator(job.topology, job.settings, time_left=time_left,
                                  adapt_timeout=req.trial_timeout is None)
    if (shown := foreign_folder(req.results)) is not None:   # (a replay: it runs no trial)
        progress.warn(f"--results {shown}")
    with contextlib.ExitStack() as held:   # unwinds the locks even when interrupted
        # numa_balancing first (refused to non-root before anything exists), then the machine
        # lock: a search refused because another holds the machine leaves nothing behind (no
        # results folder, no study file).
        numa = _numa_balancing(req, live=evaluate_is_live, held=held)
        if not req.allow_concurrent:
            held.callback(_machine_lock(job).acquire().release)
        if evaluate_is_live:   # the launches kept running between trials end with the search
            held.callback(_closed, evaluate, progress)
        accounted = Accounted(evaluate, Account())
        storage = open_storage(req.url, create_under=req.results)
        with interrupt_on_sigterm():
            study, study_lock, workers, others = open_search_study(storage, req, job, held)
            elsewhere = _opened(study, req, job, progress, storage, workers, others, study_lock,
                                numa)
            options = search_options(req, job)
            # the ceiling is timed by the live worker (a replay records no ceilings)
            options = dataclasses.replace(options, ceiling=options.ceiling and evaluate_is_live)
            result = run_search(study, space=job.space, topology=job.topology,
                                evaluate=accounted, clock=clock, options=options,
                                progress=progress, lock=study_lock,
                                deadline=workers and workers.deadline)
            accounted.phase = "recommend"
            rec, command, stored = _recommend(study, result, accounted, req, job, workers,
                                              time_left=time_left, progress=progress)
            account = _account(study, result, rec, accounted.account, req, clock)
    summary = _summary(req, job, result, rec, command, elapsed=clock.elapsed(),
                       not_resumed=elsewhere, study=study, workers=workers, stored=stored)
    summary["budget"] = account
    return Tuned(summary=summary, result=result, recommendation=rec, command=command,
                 stored=stored,
                 overridden=A.StudyAttrs.of(study).script_overrides if req.script else None)


def _opened(study: optuna.Study, req: SearchRequest, job: SearchJob, progress: Progress,
            storage, workers, others, study_lock, numa: list[str]) -> list[dict[str, str]]:
    """What a search does once its study is open, before its first trial: what killed searches
    left is settled, the study described and the start announced. Returns the workers' studies
    not resumed here (announce's)."""
    # A search killed with kill -9 leaves its ranks running and its trial RUNNING.
    reap_orphans(os.path.join(req.results, "trials"))
    # what a kill -9 left in /dev/shm, and trial folders beyond --keep-trials
    settle_trials(os.path.join(req.results, "trials"), req.keep_trials)
    stale = fail_stale_running(study)
    describe(study, req, job, job.cluster)
    progress.start(name=job.name, storage=redact(req.url), space=job.space, stale=stale,
                   topology=job.topology)
    _say_numa(progress, numa, job.topology, req.quiet_numa)
    for line in job.notes:
        progress.note(line)
    elsewhere = announce(progress, storage, job, workers, others, study_lock)
    if req.script:
        record_script(study, req, job, progress)
        progress.note("no ceiling: a script's step cannot be timed with its data resident; where "
                      "its time goes is what it reports (autotune.report_metrics(split=...)); "
                      "its accuracy is what its own runs report, not sized by the budget")
    return elsewhere


def _account(study: optuna.Study, result: SearchResult, rec: Recommendation | None,
             account: Account, req: SearchRequest, clock: Clock) -> dict[str, object]:
    """Where the budget went and what the next step would buy, stored on the study."""
    elapsed = clock.elapsed()
    out = account.to_json(elapsed_s=elapsed, budget_s=req.budget_s,
                          next_step=what_next(result, rec, account, req.budget_s),
                          settle=settle_words(rec), unused_why=unused_words(
                              result, rec, req.budget_s - elapsed,
                              round_limit(req.verify_rounds, req.max_verify_rounds)))
    A.write_budget_account(study, out)
    return out


def _machine_lock(job: SearchJob) -> MachineLock:
    """The lock one search holds: this machine's cores, or the hosts its trials run on (two
    searches from one login node, each in its own allocation, may run side by side)."""
    hosts = tuple(h.name for h in job.cluster.hosts) if job.cluster is not None else ()
    return MachineLock(machine_key(job.topology.fingerprint(), hosts))


def _closed(evaluate, progress: Progress) -> None:
    """End the launches kept between trials; a host that could not be reached to end a
    launch's processes there is said (run/unreached.py)."""
    if (line := evaluate.close()) is not None:
        progress.warn(line)


def _numa_balancing(req: SearchRequest, *, live: bool, held: contextlib.ExitStack) -> list[str]:
    """--quiet-numa: numa_balancing off until `held` unwinds (run/numa_quiet.py); a live search
    also puts back what a search that died left off. What happened, as progress lines."""
    if req.quiet_numa:
        return held.enter_context(QuietNuma()).said
    if live and os.geteuid() == 0:
        return [line for line in (restore_stale(),) if line]
    return []


def _say_numa(progress: Progress, said: list[str], topology: Topology, quiet: bool) -> None:
    """What --quiet-numa did, or a warning when numa_balancing may disturb the timings."""
    for line in said:
        progress.note(line)
    warning = disturbs(topology.memory.numa_balancing, len(topology.numa_nodes))
    if warning and not quiet:
        progress.warn(warning)


def _time_left(budget_s: float, clock: Clock) -> float:
    """What the budget has left, keeping 2 s to store the recommendation."""
    return budget_s - clock.elapsed() - 2.0


def _recommend(study: optuna.Study, result: SearchResult, evaluate: Evaluate,
               req: SearchRequest, job: SearchJob, workers: Workers | None,
               *, time_left: Callable[[], float], progress: Progress
               ) -> tuple[Recommendation | None, str | None, dict[str, object] | None]:
    """(recommendation, its launch command, another worker's stored recommendation or None):
    verify the best candidates and store the winner; in a shared search only the last worker
    verifies and the others take what it stored."""
    choose = {"rounds": req.verify_rounds, "max_rounds": req.max_verify_rounds,
              "script_mode": req.script is not None, "run_length": req.run_length,
              "time_left": time_left, "progress": progress}

    def save(rec: Recommendation | None) -> str | None:
        return save_recommendation(study, rec, job.topology, job.label,
                                   command=req.script.command if req.script else None,
                                   cluster=job.cluster)

    if workers is None:
        rec = recommend(result, evaluate, **choose)
        return rec, save(rec), None
    rec, stored = shared_recommendation(workers, study, result, evaluate, **choose)
    if stored is not None:
        return rec, stored.get("command"), stored
    with workers.lock.held():   # beside an `autotune verify` that may store its own figure
        command = save(rec)
    workers.verified()
    return rec, command, None


def _summary(req: SearchRequest, job: SearchJob, result: SearchResult, rec: Recommendation | None,
             command: str | None, *, elapsed: float, not_resumed: list[dict[str, str]],
             study: optuna.Study, workers: Workers | None,
             stored: dict[str, object] | None) -> dict[str, object]:
    """What `autotune search --json` prints."""
    summary: dict[str, object] = {
        "study": job.name, "storage": redact(req.url), "stop_reason": result.stop_reason,
        "trials_run": result.measured, "elapsed_s": round(elapsed, 1),
        "budget_s": req.budget_s, "recommendation": rec.to_json() if rec else None,
        "command": command, "not_resumed": not_resumed,
        "overridden_by_script": A.StudyAttrs.of(study).script_overrides,
        "where_the_time_goes": diagnosis_lines(
            result.records, recommended=rec.config if rec else None,
            class_of=result.book.class_of, workload=job.label, script=req.script is not None)
        if result.book is not None else []}
    if workers is not None:
        summary["worker"] = workers.id
        summary["verified_here"] = stored is None
        if stored is not None:
            summary["recommendation"] = {k: v for k, v in stored.items() if k != "command"} or None
    return summary
