"""The steps of a search that meet its study: open (or join) it, describe it, say what is not
resumed and how it is shared, and store a script's command with what its scan found."""
from __future__ import annotations

import contextlib

import optuna

from ..config import Config
from ..errors import BudgetError
from ..dashboard import set_metric_names
from ..plan.cluster import Cluster
from ..progress import Progress
from ..script.spec import ScriptSpec
from ..result import Outcome
from ..search.budget import too_short_to_verify
from ..search.references import make_sampler
from ..search.shared import StudyLock, Workers
from ..study import attrs as A
from ..study.provenance import check_resumable, not_resumed
from ..study.records import Role, records
from ..study.storage import describe_study, open_study
from .search_job import SearchJob
from .search_request import SearchRequest

NO_SEED_NOTE = ("the script takes no seed ({seed} in the command, or $AUTOTUNE_SEED read by the "
                "script): the accuracy gate compares single measurements, with no noise floor")


def open_search_study(storage: optuna.storages.BaseStorage, req: SearchRequest, job: SearchJob,
                held: contextlib.ExitStack
                ) -> tuple[optuna.Study, StudyLock | None, Workers | None, int]:
    """(study, study lock, workers, other workers) for this search. Shared: other searches may
    use this study at once (a database server, or --allow-concurrent on a file); then
    configurations are claimed through the study and one worker verifies. What is taken is
    registered on `held` to be given back, whatever happens next."""
    study = open_study(storage, job.name, sampler=make_sampler(req.seed))
    check_resumable(study, job.here)
    check_least_budget(study, req.budget_s)
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


def check_least_budget(study: optuna.Study, budget_s: float) -> None:
    """A resumed study knows what its default launch's trial cost here: a budget below the
    least that can verify anything at that cost is refused in one line (search/budget.py)."""
    cost = next((r.result.seconds for r in records(study) if r.role == Role.DEFAULT
                 and r.outcome == Outcome.OK and r.result.seconds), None)
    if cost is not None and (why := too_short_to_verify(budget_s, cost, measured=True)):
        raise BudgetError(why)


def describe(study: optuna.Study, req: SearchRequest, job: SearchJob,
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
    A.write_run_length(study, req.run_length.to_json())
    if cluster is not None:
        from ..plan.cluster import cluster_to_json
        A.write_cluster(study, cluster_to_json(cluster))


def announce(progress: Progress, storage: optuna.storages.BaseStorage, job: SearchJob,
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


def record_script(study: optuna.Study, req: SearchRequest, job: SearchJob,
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
