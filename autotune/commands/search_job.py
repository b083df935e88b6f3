"""What a search knows before its study opens, as values (SearchJob), and the options of its loop.
Nothing here touches the study."""
from __future__ import annotations

from dataclasses import dataclass

from ..config import DEFAULT_WORKLOAD
from ..plan.cluster import Cluster
from ..probe.topology import Topology
from ..run.trial import MIN_TRIAL_TIMEOUT_S, TrialSettings
from ..script.scan import entry_point_compiles
from ..script.template import freeze, placeholders, restrict_space, takes_seed
from ..search.budget import BudgetPlan, plan_budget
from ..search.options import SearchOptions
from ..space.resolve import ResolvedSpace, default_space_path, find_space, load_space, resolve
from ..study.provenance import Here
from ..study.storage import study_name
from ..training import QUALITY_SAMPLES
from .common import Say, quiet
from .hosts import probe_hosts
from .search_request import SearchRequest, check_workload


@dataclass(frozen=True, kw_only=True)
class SearchJob:
    """What a search knows before its study opens: values only, nothing touched yet."""
    label: str
    topology: Topology
    space: ResolvedSpace
    dropped: tuple[str, ...]        # script mode: knobs the command has no placeholder for
    notes: tuple[str, ...]          # what the search says of its space before the first trial
    settings: TrialSettings
    budget: BudgetPlan
    batchnorm: bool
    seeded: bool                    # a script's accuracy gets a noise floor over seeds
    sized_quality: bool             # the workload leaves its quality runs' length to the budget
    name: str                       # the study's name
    here: Here
    cluster: Cluster | None         # the hosts trials span (None: this machine)


def prepare(req: SearchRequest, *, label: str | None, topology: Topology | None,
            cluster: Cluster | None, say: Say = quiet) -> SearchJob:
    """Everything decided before the study opens: the workload's label, the hosts and the
    machine, the space and the trial settings."""
    if label is None:
        label = check_workload(req.workload, req.script)
    if cluster is None and topology is None and req.hosts is not None:
        cluster = probe_hosts(req.hosts, say, results=req.results)
    topology = _machine(topology, cluster)
    space, dropped, notes = _space(req, topology, cluster)
    batchnorm, quality_samples, own_length = _quality_facts(req)
    budget = plan_budget(req.budget_s)
    from ..probe import torch_build
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
    return SearchJob(label=label, topology=topology, space=space, dropped=tuple(dropped),
                notes=tuple(notes),
                settings=settings, budget=budget, batchnorm=batchnorm,
                # A script's --accuracy gets a noise floor over seeds when it can take a seed.
                seeded=bool(req.script and req.script.accuracy
                            and takes_seed(req.script.command)),
                name=name, here=here, cluster=cluster, sized_quality=not own_length)


def _machine(topology: Topology | None, cluster: Cluster | None) -> Topology:
    if topology is not None:
        return topology
    # Across hosts every host has the same shape (probe_cluster refuses others): the first
    # host's probe stands for all in the space, the study name and the export.
    if cluster is not None:
        return cluster.topologies[0]
    from ..probe import probe
    return probe(None)


def _space(req: SearchRequest, topology: Topology,
           cluster: Cluster | None) -> tuple[ResolvedSpace, list[str], list[str]]:
    """The resolved space, spread over the cluster's hosts; in script mode, without the knobs
    the command has no placeholder for (those are returned, dropped); with what to say of it."""
    space_path = find_space(req.space) if req.space else default_space_path(topology)
    spec = load_space(space_path)
    pipeline, notes = _pipeline(req, spec)
    space = resolve(spec, topology, pipeline=pipeline)
    if notes:   # the workload's samples cannot be made in a worker: no workers, GPU or CPU
        space, _ = freeze(space, ["dataloader_workers"])
    compiles = None if req.script else entry_point_compiles(req.workload or DEFAULT_WORKLOAD)
    if compiles and "compile" in space.knobs:   # never offered twice (issue 59)
        space, _ = freeze(space, ["compile"])
        notes = [*notes, f"compile not offered: the workload compiles its model itself "
                         f"({compiles})"]
    if cluster is not None:
        space = space.across(len(cluster.hosts))
    if req.script:
        return (*restrict_space(space, placeholders(req.script.command)), notes)
    return space, [], notes


def _pipeline(req: SearchRequest, spec) -> tuple[bool, list[str]]:
    """(whether the trials batch through a pipeline of the workload's own, which DataLoader
    workers can take over; the one line that rules the workers out when the workload's samples
    cannot be made in a worker process). A script has one where it takes {dataloader_workers}."""
    if "dataloader_workers" not in spec.knobs:
        return False, []
    if req.script:
        return "dataloader_workers" in placeholders(req.script.command), []
    from ..worker.data import pipeline_facts
    name = req.workload or DEFAULT_WORKLOAD
    has, why = pipeline_facts(name, device=str(spec.fixed.get("device", "cpu")))
    if why is None:
        return has, []
    return False, [f"dataloader_workers ruled out for workload {name}: its samples cannot be "
                   f"made in a DataLoader worker process ({why}); the search goes on without it"]


def _quality_facts(req: SearchRequest) -> tuple[bool, int, bool]:
    """(batchnorm, samples of a quality run, whether that length is the workload's own) for the
    workload; a script is taken as batchnorm, with a length of its own (it is not rerun)."""
    if req.script:
        return True, QUALITY_SAMPLES, True
    from ..worker.workloads import quality_facts
    return quality_facts(req.workload or DEFAULT_WORKLOAD)


def search_options(req: SearchRequest, job: SearchJob) -> SearchOptions:
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
                         size_quality=job.sized_quality and req.quality_samples is None,
                         guide=req.guide,
                         # a script times itself: there are no windows to judge it by
                         early_stop=req.early_stop and req.script is None,
                         # a script's step cannot be timed with its data resident
                         ceiling=req.script is None)
