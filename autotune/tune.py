"""The pipeline composed once: probe -> space -> study -> search -> recommend -> export.

`search(SearchRequest(...))` runs a whole `autotune search` and returns what it found; the CLI
only parses arguments into a SearchRequest, calls this and prints. Tests drive whole searches
through it without argparse. Progress is reported to an observer (`Silent` by default; the CLI
passes its terminal progress).
"""
from __future__ import annotations

import hashlib
import math
import os
import time
from dataclasses import dataclass
from typing import Any

from .config import Config
from .errors import AutotuneError, WorkloadError
from .export.recommendation import save_recommendation
from .measure.script import check_command, placeholders, restrict_space, takes_seed
from .measure.script_scan import held_from_scan, scan_command, script_notes, script_settings
from .plan.cluster import Cluster
from .probe.topology import Topology
from .recommend.choose import recommend, shared_recommendation
from .run.idle import IDLE_DEADLINE_S
from .run.runner import interrupt_on_sigterm, reap_orphans
from .run.trial import TrialSettings, live_evaluator
from .search.budget import plan_budget
from .search.lock import MachineLock
from .search.loop import run_search
from .search.options import SearchOptions, SearchResult
from .search.references import make_sampler
from .search.shared import StudyLock, Workers
from .space.resolve import default_space_path, find_space, load_space, resolve
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
    workload: str = "cnn"                       # built-in name or module:function
    script: tuple[str, ...] | None = None       # a user's command (script mode)
    metric: str | None = None
    accuracy: str | None = None                 # --accuracy REGEX (script mode)
    lower_is_better: bool = False
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
    trial_timeout: float | None = None
    allow_concurrent: bool = False
    idle_timeout: float = IDLE_DEADLINE_S       # see run/idle.py

    def __post_init__(self) -> None:
        if not math.isfinite(self.max_accuracy_drop) or self.max_accuracy_drop < 0:
            raise AutotuneError(f"--max-accuracy-drop {self.max_accuracy_drop}: must be a number "
                                ">= 0 (percentage points)")
        if self.quality_seeds < 2:
            raise AutotuneError(f"--quality-seeds {self.quality_seeds}: at least 2 seeds are "
                                "needed to measure the noise")
        if self.quality_samples is not None and self.quality_samples < 1:
            raise AutotuneError(f"--quality-samples {self.quality_samples}: must be positive")
        if self.verify_rounds < 1:
            raise AutotuneError(f"--verify-rounds {self.verify_rounds}: must be at least 1")

    @property
    def url(self) -> str:
        return self.storage or default_storage(self.results)


@dataclass(frozen=True, kw_only=True)
class Tuned:
    """What a search found: `summary` is what `autotune search --json` prints."""
    summary: dict[str, Any]
    result: SearchResult
    recommendation: Any                 # recommend.verify.Recommendation | None
    command: str | None
    stored: dict[str, Any] | None       # another worker's recommendation (shared search)
    overridden: dict[str, str] | None   # script mode: knobs the script overrides


class Silent:
    """The progress observer of a search nobody watches."""

    def start(self, **_info: Any) -> None: ...

    def note(self, _text: str) -> None: ...

    def warn(self, _text: str) -> None: ...

    def event(self, _kind: str, **_info: Any) -> None: ...


def check_workload(workload: str = "cnn", script: tuple[str, ...] | None = None, *,
                   metric: str | None = None, accuracy: str | None = None,
                   lower_is_better: bool = False) -> str:
    """Validate the workload in this process before any trial; returns its label for studies.

    Script mode (a command): program, script file, placeholders and --metric pattern. Otherwise
    the workload is loaded here once: a typo in `module:function`, an import error or a wrong
    return type is one line at once, not two failed reference trials."""
    if script is None:
        for given, flag in ((metric, "--metric"), (accuracy, "--accuracy"),
                            (lower_is_better, "--lower-is-better")):
            if given:
                raise WorkloadError(f"{flag} reads a script's output: give the command after `--`")
        from .worker.workloads import get_workload
        try:
            get_workload(workload)
        except WorkloadError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's own code failed: its words
            raise WorkloadError(f"workload {workload!r} failed when loaded: "
                                f"{type(exc).__name__}: {exc}") from exc
        return workload
    if workload != "cnn":
        raise WorkloadError("give either --workload or a command after `--`, not both")
    check_command(script, metric, accuracy, lower_is_better)
    named = next((os.path.basename(a) for a in script[1:] if a.endswith(".py")),
                 os.path.basename(script[0]))
    digest = hashlib.sha1(repr((script, metric, os.getcwd())).encode()).hexdigest()[:8]
    if lower_is_better:   # another score for the same numbers: another study
        digest = hashlib.sha1(f"{digest}:lower".encode()).hexdigest()[:8]
    return f"script-{named}-{digest}"


def search(req: SearchRequest, *, label: str | None = None, topology: Topology | None = None,
           cluster: Cluster | None = None, progress=None,
           started: float | None = None) -> Tuned:
    """One whole search: probe (unless `topology` is given), resolve the space, open or resume
    the study, measure the references and the sampler's trials within the budget, verify and
    store the recommendation with its launch command. `label` (from check_workload) names the
    study; `cluster` spreads trials over hosts probed beforehand. KeyboardInterrupt propagates
    after the study is left consistent (completed trials kept, the running one interrupted)."""
    started = time.monotonic() if started is None else started
    progress = progress if progress is not None else Silent()
    budget_s = req.budget_s
    bp = plan_budget(budget_s)
    if label is None:
        label = check_workload(req.workload, req.script, metric=req.metric,
                               accuracy=req.accuracy, lower_is_better=req.lower_is_better)
    if topology is None:
        # Across hosts every host has the same shape (probe_cluster refuses others): the first
        # host's probe stands for all in the space, the study name and the export.
        if cluster is not None:
            topology = cluster.topologies[0]
        else:
            from .probe import probe
            topology = probe(None)
    space_path = find_space(req.space) if req.space else default_space_path(topology)
    space = resolve(load_space(space_path), topology)
    if req.script:
        from .worker.workloads import QUALITY_SAMPLES
        batchnorm, quality_samples = True, QUALITY_SAMPLES
    else:
        from .worker.workloads import quality_facts
        batchnorm, quality_samples = quality_facts(req.workload)
    if cluster is not None:
        space = space.across(len(cluster.hosts))
    dropped: list[str] = []
    if req.script:
        space, dropped = restrict_space(space, placeholders(req.script))
    url = req.url
    storage = open_storage(url, create_under=req.results)
    from .probe import torch_build
    here = Here(topology=topology, torch=torch_build())
    # A study across hosts is another study than one on the first host alone.
    name = study_name(label if cluster is None else f"{label}-{len(cluster.hosts)}hosts",
                      topology, space.name, torch=here.torch)

    def elapsed() -> float:
        return time.monotonic() - started

    def time_left() -> float:
        return budget_s - elapsed() - 2.0

    settings = TrialSettings(**script_settings(req), workload=req.workload,
                             target_seconds=req.seconds or bp.target_seconds,
                             results_dir=req.results,
                             timeout_s=req.trial_timeout or max(30.0, budget_s / 4),
                             accuracy_samples=req.quality_samples or quality_samples,
                             cluster=cluster, idle_s=req.idle_timeout)
    scan = scan_command(req.script) if req.script else None
    # A script's --accuracy gets a noise floor over seeds when the script can take a seed.
    seeded = bool(req.script and req.accuracy and takes_seed(req.script))
    lock = None if req.allow_concurrent else MachineLock(topology.fingerprint()).acquire()
    # Shared: other searches may use this study at once (a database server, or --allow-concurrent
    # on a file); then configurations are claimed through the study and one worker verifies.
    shared = req.allow_concurrent or not url.startswith(("sqlite:", "journal:"))
    study_lock = workers = stored = None
    try:
        with interrupt_on_sigterm():
            study = open_study(storage, name, sampler=make_sampler(req.seed))
            check_resumable(study, here)
            others = 0
            if shared:
                study_lock = StudyLock(url, name)
                workers = Workers(study, study_lock, budget_s=budget_s)
                others = workers.join()
                if others:  # the same seed would make every worker propose the same trials
                    study = open_study(storage, name, sampler=make_sampler(req.seed + others))
            # A search killed with kill -9 leaves its ranks running and its trial RUNNING.
            reap_orphans(os.path.join(req.results, "trials"))
            stale = fail_stale_running(study)
            describe_study(study, topology=topology, workload=label,
                           space=space.to_json(), settings={
                               "target_seconds": settings.target_seconds,
                               "max_accuracy_drop": req.max_accuracy_drop,
                               "quality_samples": settings.accuracy_samples,
                               "quality_seeds": req.quality_seeds, "batchnorm": batchnorm,
                               "reference_batch": Config().global_batch}, torch=here.torch)
            if cluster is not None:
                from .plan.cluster import cluster_to_json
                A.write_cluster(study, cluster_to_json(cluster))
            progress.start(name=name, storage=redact(url), space=space, stale=stale,
                           topology=topology)
            # Studies of this job measured elsewhere stay in the storage but are never resumed.
            elsewhere = [{"study": other, "reason": why} for other, why in
                         not_resumed(storage, here, workload=label, space=space.name)]
            for other in elsewhere:
                progress.note(f"not resumed: study {other['study']} ({other['reason']})")
            if workers is not None:
                progress.note(f"shared search (worker {workers.id}, {others} other(s) searching): "
                              "configurations are claimed through the study; the last worker to "
                              "finish verifies for all")
                if not study_lock.atomic:
                    progress.note("this storage has no lock autotune can take (PostgreSQL and "
                                  "file storages have): workers may both run a configuration")
            if req.script:
                # export fills this template with the tuned values
                A.write_script(study, command=list(req.script), metric=req.metric,
                               lower_is_better=req.lower_is_better, accuracy=req.accuracy,
                               scan=scan.to_json(), warning=scan.warning())
                script_notes(progress, req, dropped, scan)
                if req.accuracy and not seeded:
                    A.write_script_noise_floor(study, {"note": NO_SEED_NOTE})
                    progress.note(NO_SEED_NOTE)
            evaluate = live_evaluator(topology, settings, time_left=time_left,
                                      adapt_timeout=req.trial_timeout is None)

            class _Clock:
                def elapsed(self) -> float:
                    return elapsed()

            options = SearchOptions(script_seeds=tuple(range(req.quality_seeds)) if seeded else (),
                                    budget_s=budget_s, verify_reserve_s=bp.verify_reserve_s,
                                    min_trial_s=bp.min_trial_s, verify_rounds=req.verify_rounds,
                                    max_accuracy_drop=req.max_accuracy_drop, seed=req.seed,
                                    max_trials=req.max_trials,
                                    reported_accuracy=req.script is not None,
                                    accuracy_required=req.accuracy is not None,
                                    overridden=held_from_scan(scan),
                                    batchnorm=batchnorm,
                                    quality_seeds=tuple(range(req.quality_seeds)),
                                    quality_samples=settings.accuracy_samples)
            result = run_search(study, space=space, topology=topology, evaluate=evaluate,
                                clock=_Clock(), options=options, on_event=progress.event,
                                lock=study_lock, deadline=workers and workers.deadline)
            choose = {"rounds": req.verify_rounds, "script_mode": req.script is not None,
                      "time_left": time_left, "progress": progress,
                      "quality_samples": settings.accuracy_samples}
            if workers is None:
                rec = recommend(result, evaluate, **choose)
                command = save_recommendation(study, rec, topology, label, command=req.script,
                                              cluster=cluster)
            else:
                rec, stored = shared_recommendation(workers, study, result, evaluate, **choose)
                command = (save_recommendation(study, rec, topology, label, command=req.script,
                                               cluster=cluster)
                           if stored is None else stored.get("command"))
                if stored is None:
                    workers.verified()
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
               "overridden_by_script": A.StudyAttrs.of(study).script_overrides}
    if workers is not None:
        summary["worker"] = workers.id
        summary["verified_here"] = stored is None
        if stored is not None:
            summary["recommendation"] = {k: v for k, v in stored.items() if k != "command"} or None
    return Tuned(summary=summary, result=result, recommendation=rec, command=command,
                 stored=stored,
                 overridden=A.StudyAttrs.of(study).script_overrides if req.script else None)
