"""The pipeline composed once: probe -> space -> study -> search -> recommend -> export.

`search(SearchRequest(...))` runs a whole `autotune search` and returns what it found; the CLI
only parses arguments into a SearchRequest, calls this and prints. Tests drive whole searches
through it without argparse. Progress is reported to a `progress.Progress` (silent by default;
the CLI passes its terminal display).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import os
import time
from dataclasses import dataclass
from typing import Callable

import optuna

from .config import DEFAULT_WORKLOAD, Config
from .dashboard import set_metric_names
from .errors import AutotuneError, WorkloadError
from .export.recommendation import save_recommendation
from .script.spec import ScriptSpec
from .script.template import placeholders, restrict_space, takes_seed
from .plan.cluster import Cluster
from .probe.topology import Topology
from .recommend.choose import recommend, shared_recommendation
from .recommend.verify import Recommendation
from .run.idle import IDLE_DEADLINE_S
from .run.runner import interrupt_on_sigterm, reap_orphans
from .result import Evaluate
from .private_files import foreign_folder
from .progress import SILENT, Progress
from .run.trials_dir import DEFAULT_KEEP as DEFAULT_KEEP_TRIALS, settle as settle_trials
from .run.trial import MIN_TRIAL_TIMEOUT_S, TrialSettings, live_evaluator
from .search.budget import BudgetPlan, plan_budget
from .search.lock import MachineLock
from .training import QUALITY_SAMPLES
from .search.loop import run_search
from .search.options import Clock, SearchOptions, SearchResult
from .search.references import make_sampler
from .search.shared import StudyLock, Workers
from .space.resolve import ResolvedSpace, default_space_path, find_space, load_space, resolve
from .study import attrs as A
from .study.provenance import Here, check_resumable, not_resumed
from .study.storage import (default_storage, describe_study, open_storage, open_study, redact, study_name)
from .study.owners import fail_stale_running


NO_SEED_NOTE = ("the script takes no seed ({seed} in the command, or $AUTOTUNE_SEED read by the "
                "script): the accuracy gate compares single measurements, with no noise floor")


@dataclass(frozen=True, kw_only=True)
class SearchRequest:
    """Everything `autotune search` is asked, as one value (the CLI's flags, by the same names).
    Checked once, here, with messages that name the flag."""
    budget_s: float
    workload: str | None = None                 # built-in name or module:function; None:
                                                # not given (DEFAULT_WORKLOAD, or a script)
    script: ScriptSpec | None = None            # a user's command (script mode)
    seconds: float | None = None                # timed window; None: from the budget
    results: str = "autotune-results"
    storage: str | None = None                  # None: the SQLite file under `results`
    space: str | None = None                    # None: the built-in space for this machine
    max_accuracy_drop: float = 1.0
    quality_seeds: int = 3
    quality_samples: int | None = None
    seed: int = 0
    max_trials: int | None = None
    verify_rounds: int = 3
    # rounds verification may go on to while the speedup is unsettled; None: MAX_ROUNDS_FACTOR x
    max_verify_rounds: int | None = None
    trial_timeout: float | None = None
    allow_concurrent: bool = False
    idle_timeout: float = IDLE_DEADLINE_S       # see run/idle.py
    keep_trials: int | None = DEFAULT_KEEP_TRIALS   # trial folders kept; None: all (trials_dir.py)
    guide: str = "descent"                      # search/guide.py (GUIDES)
    early_stop: bool = True                     # built-in workloads only: measure/early_stop.py

    def __post_init__(self) -> None:
        if not math.isfinite(self.max_accuracy_drop) or self.max_accuracy_drop < 0:
            raise AutotuneError(f"--max-accuracy-drop {self.max_accuracy_drop}: must be a number "
                                ">= 0 (percentage points)")
        if self.quality_seeds < 2:
            raise AutotuneError(f"--quality-seeds {self.quality_seeds}: at least 2 seeds are "
                                "needed to measure the noise")
        if self.quality_samples is not None and self.quality_samples < 1:
            raise AutotuneError(f"--quality-samples {self.quality_samples}: must be positive")
        if self.keep_trials is not None and self.keep_trials < 1:
            raise AutotuneError(f"--keep-trials {self.keep_trials}: keep at least 1 (or 'all')")
        if self.verify_rounds < 1:
            raise AutotuneError(f"--verify-rounds {self.verify_rounds}: must be at least 1")
        if self.max_verify_rounds is not None and self.max_verify_rounds < self.verify_rounds:
            raise AutotuneError(f"--max-verify-rounds {self.max_verify_rounds}: must be at least "
                                f"--verify-rounds ({self.verify_rounds})")

    @property
    def url(self) -> str:
        return self.storage or default_storage(self.results)


@dataclass(frozen=True, kw_only=True)
class Tuned:
    """What a search found: `summary` is what `autotune search --json` prints."""
    summary: dict[str, object]
    result: SearchResult
    recommendation: Recommendation | None
    command: str | None
    stored: dict[str, object] | None    # another worker's recommendation (shared search)
    overridden: dict[str, str] | None   # script mode: knobs the script overrides


def check_workload(workload: str | None = None, script: ScriptSpec | None = None) -> str:
    """Validate the workload in this process before any trial; returns its label for studies.
    `workload` None: none was named (the default one, unless a command is given).

    Script mode (a command): program, script file, placeholders and --metric pattern. Otherwise
    the workload is loaded here once: a typo in `module:function`, an import error or a wrong
    return type is one line at once, not two failed reference trials."""
    if script is None:
        workload = workload or DEFAULT_WORKLOAD
        from .worker.workloads import get_workload
        try:
            get_workload(workload)
        except WorkloadError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's own code failed: its words
            raise WorkloadError(f"workload {workload!r} failed when loaded: "
                                f"{type(exc).__name__}: {exc}") from exc
        return workload
    if workload is not None:
        raise WorkloadError("give either --workload or a command after `--`, not both")
    script.check()
    command = script.command
    named = next((os.path.basename(a) for a in command[1:] if a.endswith(".py")),
                 os.path.basename(command[0]))
    digest = hashlib.sha1(repr((command, script.metric, os.getcwd())).encode()).hexdigest()[:8]
    if script.lower_is_better:   # another score for the same numbers: another study
        digest = hashlib.sha1(f"{digest}:lower".encode()).hexdigest()[:8]
    return f"script-{named}-{digest}"


class MonotonicClock:
    """Seconds since the search started, on the wall clock. A replay passes its own clock (any
    object with `elapsed()`), advanced by what each recorded trial cost."""

    def __init__(self, started: float | None = None) -> None:
        self.started = time.monotonic() if started is None else started

    def elapsed(self) -> float:
        return time.monotonic() - self.started


@dataclass(frozen=True, kw_only=True)
class _Job:
    """What a search knows before its study opens: values only, nothing touched yet."""
    label: str
    topology: Topology
    space: ResolvedSpace
    dropped: tuple[str, ...]        # script mode: knobs the command has no placeholder for
    settings: TrialSettings
    budget: BudgetPlan
    batchnorm: bool
    seeded: bool                    # a script's accuracy gets a noise floor over seeds
    name: str                       # the study's name
    here: Here


def search(req: SearchRequest, *, label: str | None = None, topology: Topology | None = None,
           cluster: Cluster | None = None, progress: Progress = SILENT,
           started: float | None = None,
           evaluate: Evaluate | None = None, clock: Clock | None = None) -> Tuned:
    """One whole search: probe (unless `topology` is given), resolve the space, open or resume
    the study, measure the references and the sampler's trials within the budget, verify and
    store the recommendation with its launch command. `label` (from check_workload) names the
    study; `cluster` spreads trials over hosts probed beforehand. KeyboardInterrupt propagates
    after the study is left consistent (completed trials kept, the running one interrupted).

    `evaluate` measures a configuration (`run.trial.Evaluate`); None: real trials
    (`live_evaluator`). `clock` (an object with `elapsed()`) spends the budget; None: the wall
    clock since `started`. A replay of a recorded landscape passes both and runs in seconds."""
    clock = clock if clock is not None else MonotonicClock(started)
    job = _prepare(req, label=label, topology=topology, cluster=cluster)
    time_left = functools.partial(_time_left, req.budget_s, clock)
    if evaluate is None:
        evaluate = live_evaluator(job.topology, job.settings, time_left=time_left,
                                  adapt_timeout=req.trial_timeout is None)
    with contextlib.ExitStack() as held:   # unwinds the locks even when interrupted
        # The machine lock first: a search refused because another holds the machine leaves
        # nothing behind (no results folder, no study file).
        if not req.allow_concurrent:
            held.callback(MachineLock(job.topology.fingerprint()).acquire().release)
        storage = open_storage(req.url, create_under=req.results)
        with interrupt_on_sigterm():
            study, study_lock, workers, others = _open_study(storage, req, job, held)
            # A search killed with kill -9 leaves its ranks running and its trial RUNNING.
            reap_orphans(os.path.join(req.results, "trials"))
            # what a kill -9 left in /dev/shm, and trial folders beyond --keep-trials
            settle_trials(os.path.join(req.results, "trials"), req.keep_trials)
            stale = fail_stale_running(study)
            _describe(study, req, job, cluster)
            progress.start(name=job.name, storage=redact(req.url), space=job.space, stale=stale,
                           topology=job.topology)
            elsewhere = _announce(progress, storage, job, workers, others, study_lock)
            if (shown := foreign_folder(req.results)) is not None:
                progress.warn(f"--results {shown}")
            if req.script:
                _record_script(study, req, job, progress)
            result = run_search(study, space=job.space, topology=job.topology,
                                evaluate=evaluate, clock=clock, options=_options(req, job),
                                progress=progress, lock=study_lock,
                                deadline=workers and workers.deadline)
            rec, command, stored = _recommend(study, result, evaluate, req, job, workers,
                                              cluster, time_left=time_left, progress=progress)
    summary = _summary(req, job, result, rec, command, elapsed=clock.elapsed(),
                       not_resumed=elsewhere, study=study, workers=workers, stored=stored)
    return Tuned(summary=summary, result=result, recommendation=rec, command=command,
                 stored=stored,
                 overridden=A.StudyAttrs.of(study).script_overrides if req.script else None)


def _time_left(budget_s: float, clock: Clock) -> float:
    """What the budget has left, keeping 2 s to store the recommendation."""
    return budget_s - clock.elapsed() - 2.0


def _prepare(req: SearchRequest, *, label: str | None, topology: Topology | None,
             cluster: Cluster | None) -> _Job:
    """Everything decided before the study opens: the workload's label, the machine, the space
    and the trial settings."""
    if label is None:
        label = check_workload(req.workload, req.script)
    topology = _machine(topology, cluster)
    space, dropped = _space(req, topology, cluster)
    batchnorm, quality_samples = _quality_facts(req)
    budget = plan_budget(req.budget_s)
    from .probe import torch_build
    here = Here(topology=topology, torch=torch_build())
    # A study across hosts is another study than one on the first host alone.
    name = study_name(label if cluster is None else f"{label}-{len(cluster.hosts)}hosts",
                      topology, space.name, torch=here.torch)
    settings = TrialSettings(script=req.script,
                             workload=req.workload or DEFAULT_WORKLOAD,
                             target_seconds=req.seconds or budget.target_seconds,
                             results_dir=req.results,
                             timeout_s=req.trial_timeout or max(MIN_TRIAL_TIMEOUT_S, req.budget_s / 4),
                             accuracy_samples=req.quality_samples or quality_samples,
                             cluster=cluster, idle_s=req.idle_timeout)
    return _Job(label=label, topology=topology, space=space, dropped=tuple(dropped),
                settings=settings, budget=budget, batchnorm=batchnorm,
                # A script's --accuracy gets a noise floor over seeds when it can take a seed.
                seeded=bool(req.script and req.script.accuracy
                            and takes_seed(req.script.command)),
                name=name, here=here)


def _machine(topology: Topology | None, cluster: Cluster | None) -> Topology:
    if topology is not None:
        return topology
    # Across hosts every host has the same shape (probe_cluster refuses others): the first
    # host's probe stands for all in the space, the study name and the export.
    if cluster is not None:
        return cluster.topologies[0]
    from .probe import probe
    return probe(None)


def _space(req: SearchRequest, topology: Topology,
           cluster: Cluster | None) -> tuple[ResolvedSpace, list[str]]:
    """The resolved space, spread over the cluster's hosts; in script mode, without the knobs
    the command has no placeholder for (those are returned, dropped)."""
    space_path = find_space(req.space) if req.space else default_space_path(topology)
    space = resolve(load_space(space_path), topology)
    if cluster is not None:
        space = space.across(len(cluster.hosts))
    if req.script:
        return restrict_space(space, placeholders(req.script.command))
    return space, []


def _quality_facts(req: SearchRequest) -> tuple[bool, int]:
    """(batchnorm, samples of a quality run) for the workload; a script is taken as batchnorm."""
    if req.script:
        return True, QUALITY_SAMPLES
    from .worker.workloads import quality_facts
    return quality_facts(req.workload or DEFAULT_WORKLOAD)


def _open_study(storage: optuna.storages.BaseStorage, req: SearchRequest, job: _Job,
                held: contextlib.ExitStack
                ) -> tuple[optuna.Study, StudyLock | None, Workers | None, int]:
    """(study, study lock, workers, other workers) for this search. Shared: other searches may
    use this study at once (a database server, or --allow-concurrent on a file); then
    configurations are claimed through the study and one worker verifies. What is taken is
    registered on `held` to be given back, whatever happens next."""
    study = open_study(storage, job.name, sampler=make_sampler(req.seed))
    check_resumable(study, job.here)
    if not (req.allow_concurrent or not req.url.startswith(("sqlite:", "journal:"))):
        return study, None, None, 0
    study_lock = StudyLock(req.url, job.name)
    held.callback(study_lock.close)
    workers = Workers(study, study_lock, budget_s=req.budget_s)
    # no-op unless this worker was cut off verifying
    held.callback(workers.verified, "abandoned")
    others = workers.join()
    if others:  # the same seed would make every worker propose the same trials
        study = open_study(storage, job.name, sampler=make_sampler(req.seed + others))
    return study, study_lock, workers, others


def _describe(study: optuna.Study, req: SearchRequest, job: _Job,
              cluster: Cluster | None) -> None:
    """The study's self-description: machine, workload, space and the settings of its trials."""
    describe_study(study, topology=job.topology, workload=job.label,
                   space=job.space.to_json(), settings={
                       "target_seconds": job.settings.target_seconds,
                       "max_accuracy_drop": req.max_accuracy_drop,
                       "quality_samples": job.settings.accuracy_samples,
                       "quality_seeds": req.quality_seeds, "batchnorm": job.batchnorm,
                       "reference_batch": Config().global_batch}, torch=job.here.torch)
    set_metric_names(study)   # the dashboard's labels of the two objectives
    if cluster is not None:
        from .plan.cluster import cluster_to_json
        A.write_cluster(study, cluster_to_json(cluster))


def _announce(progress: Progress, storage: optuna.storages.BaseStorage, job: _Job,
              workers: Workers | None, others: int,
              study_lock: StudyLock | None) -> list[dict[str, str]]:
    """Tell the user what this search does not resume and how it shares; returns the studies of
    this job measured elsewhere (they stay in the storage but are never resumed)."""
    elsewhere = [{"study": other, "reason": why} for other, why in
                 not_resumed(storage, job.here, workload=job.label, space=job.space.name)]
    for other in elsewhere:
        progress.note(f"not resumed: study {other['study']} ({other['reason']})")
    if workers is not None:
        progress.note(f"shared search (worker {workers.id}, {others} other(s) searching): "
                      "configurations are claimed through the study; the last worker to "
                      "finish verifies for all")
        if not study_lock.atomic:
            progress.note("this storage has no lock autotune can take (PostgreSQL and "
                          "file storages have): workers may both run a configuration")
    return elsewhere


def _record_script(study: optuna.Study, req: SearchRequest, job: _Job,
                   progress: Progress) -> None:
    """Script mode: store the command (export fills this template with the tuned values) and
    what the scan of it found."""
    A.write_script(study, req.script)
    script_notes(progress, req.script, req.max_accuracy_drop, list(job.dropped))
    if req.script.accuracy and not job.seeded:
        A.write_script_noise_floor(study, {"note": NO_SEED_NOTE})
        progress.note(NO_SEED_NOTE)


def script_notes(progress: Progress, script: ScriptSpec, max_accuracy_drop: float,
                 dropped: list[str]) -> None:
    """What a script-mode search will measure, said once before the first trial."""
    scan = script.scan
    if scan.warning():
        # One warning, before the first trial; stored so `report` and the dashboard show it.
        progress.warn(scan.warning())
    if scan.self_launching:
        progress.note("the script starts its own workers: autotune launches it once (nproc=1) "
                      "and tunes the environment, binding and libraries its workers inherit")
    if script.metric:
        order = "lower is better: a time or a loss" if script.lower_is_better else "higher is better"
        progress.note("metric: autotune.report_metrics() if the script calls it, else the "
                      f"median of --metric {script.metric!r} over rank 0's output ({order})")
    else:
        progress.note("metric: autotune.report_metrics() if the script calls it; otherwise each "
                      "trial is scored by its wall time for the whole run, start-up included, "
                      "printed in seconds per run -- the WEAKEST measure (valid only for a fixed "
                      "amount of work); pass --metric REGEX or call autotune.report_metrics() for "
                      "a real throughput")
    if script.accuracy:
        progress.note(f"accuracy: the last match of --accuracy {script.accuracy!r}, held to "
                      f"--max-accuracy-drop {max_accuracy_drop} points")
    if dropped:
        progress.note(f"not tuned (the command has no placeholder for them): {', '.join(dropped)}")


def _options(req: SearchRequest, job: _Job) -> SearchOptions:
    bp = job.budget
    return SearchOptions(script_seeds=tuple(range(req.quality_seeds)) if job.seeded else (),
                         budget_s=req.budget_s, verify_reserve_s=bp.verify_reserve_s,
                         min_trial_s=bp.min_trial_s, verify_rounds=req.verify_rounds,
                         max_accuracy_drop=req.max_accuracy_drop, seed=req.seed,
                         max_trials=req.max_trials,
                         reported_accuracy=req.script is not None,
                         accuracy_required=req.script is not None
                         and req.script.accuracy is not None,
                         overridden=req.script.held() if req.script else {},
                         batchnorm=job.batchnorm,
                         quality_seeds=tuple(range(req.quality_seeds)),
                         quality_samples=job.settings.accuracy_samples,
                         guide=req.guide,
                         # a script times itself: there are no windows to judge it by
                         early_stop=req.early_stop and req.script is None)


def _recommend(study: optuna.Study, result: SearchResult, evaluate: Evaluate,
               req: SearchRequest, job: _Job, workers: Workers | None, cluster: Cluster | None,
               *, time_left: Callable[[], float], progress: Progress
               ) -> tuple[Recommendation | None, str | None, dict[str, object] | None]:
    """(recommendation, its launch command, another worker's stored recommendation or None):
    verify the best candidates and store the winner; in a shared search only the last worker
    verifies and the others take what it stored."""
    choose = {"rounds": req.verify_rounds, "max_rounds": req.max_verify_rounds,
              "script_mode": req.script is not None,
              "time_left": time_left, "progress": progress,
              "quality_samples": job.settings.accuracy_samples}

    def save(rec: Recommendation | None) -> str | None:
        return save_recommendation(study, rec, job.topology, job.label,
                                   command=req.script.command if req.script else None,
                                   cluster=cluster)

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


def _summary(req: SearchRequest, job: _Job, result: SearchResult, rec: Recommendation | None,
             command: str | None, *, elapsed: float, not_resumed: list[dict[str, str]],
             study: optuna.Study, workers: Workers | None,
             stored: dict[str, object] | None) -> dict[str, object]:
    """What `autotune search --json` prints."""
    summary: dict[str, object] = {
        "study": job.name, "storage": redact(req.url), "stop_reason": result.stop_reason,
        "trials_run": result.measured, "elapsed_s": round(elapsed, 1),
        "budget_s": req.budget_s, "recommendation": rec.to_json() if rec else None,
        "command": command, "not_resumed": not_resumed,
        "overridden_by_script": A.StudyAttrs.of(study).script_overrides}
    if workers is not None:
        summary["worker"] = workers.id
        summary["verified_here"] = stored is None
        if stored is not None:
            summary["recommendation"] = {k: v for k, v in stored.items() if k != "command"} or None
    return summary
