"""`autotune export`: the tuned launch command, rebuilt from the topology stored with the study
(so it can be exported later and elsewhere), in the format the user's launcher takes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import optuna

from ..clean import one_line, printable
from ..config import DEFAULT_WORKLOAD, Config
from ..errors import AutotuneError, StorageError
from ..export.command import launch_command, render, training_command
from ..export.recommendation import figure_fields, script_launch
from ..plan.build import preloads
from ..plan.cluster import Cluster, cluster_from_json
from ..plan.launch_plan import STANDALONE_SECONDS
from ..probe import probe
from ..probe.topology import Topology
from ..result import Outcome
from ..script.template import fill
from ..study.attrs import StudyAttrs
from ..study.records import Role, has_record, record_of, records
from ..study.trust import check_stored_cluster, check_stored_libraries
from .common import Say, StudyRef, open_results, quiet


@dataclass(frozen=True, kw_only=True)
class ExportRequest:
    format: str = "shell"
    study: StudyRef = field(default_factory=StudyRef)
    trial: int | None = None               # a trial's configuration instead of the recommendation
    seconds: float = STANDALONE_SECONDS    # how long the built-in trainer in the command runs
    trust_study: bool = False              # LD_PRELOAD paths this machine's probe does not find


def export(req: ExportRequest, *, say: Say = quiet) -> str:
    """The command as text (control characters escaped); `say` gets the warnings."""
    opened = open_results(req.study)
    study = opened.study
    attrs = StudyAttrs.of(study)
    topology = _stored_topology(study, attrs)
    workload = str(attrs.workload or DEFAULT_WORKLOAD)
    manifest = {"study": study.study_name, "fingerprint": attrs.fingerprint,
                "machine": topology.isa.describe(), "workload": workload,
                "library_versions": attrs.library_versions}
    config, extra = _recommended(study) if req.trial is None else _from_trial(study, req.trial,
                                                                               say)
    manifest.update(extra)
    template = attrs.script_command
    script: dict[str, Any] = {}
    if template:  # script mode: the user's own invocation, with the tuned values filled in
        program = fill(tuple(template), config)
        script = script_launch(attrs)
    else:
        program = training_command(workload, config, seconds=req.seconds)
    cluster = _stored_cluster(study, attrs)
    _check_libraries(req, config, cluster.topologies if cluster else (topology,), say)
    cmd = launch_command(config, topology, workload=workload, program=program, manifest=manifest,
                         cluster=cluster, **script)
    if cluster is None:   # across hosts the command runs there, not here
        for note in opened.notes:   # a command tuned elsewhere may bind CPUs or load libraries wrongly
            say(f"autotune: warning: {one_line(note)}")
    text = render(cmd, req.format)
    if printable(text) != text:   # a control character in the stored command's arguments
        say("autotune: warning: the stored command holds control characters; they are "
            "shown escaped (\\x..), so check it before you run it")
    return printable(text)


def _stored_topology(study: optuna.Study, attrs: StudyAttrs) -> Topology:
    if not attrs.described:
        raise StorageError(f"study {study.study_name!r} has no stored topology: not written by "
                           "`autotune search`")
    try:
        return Topology.from_json(attrs.topology_json)
    except (KeyError, TypeError, ValueError) as exc:
        raise StorageError(f"study {study.study_name!r}: stored topology is unreadable "
                           f"({type(exc).__name__}: {exc})") from None


def _stored_cluster(study: optuna.Study, attrs: StudyAttrs) -> Cluster | None:
    """The hosts of a study across hosts (the commands start every host), checked."""
    if not attrs.cluster_json:
        return None
    try:
        cluster = cluster_from_json(attrs.cluster_json)
    except (KeyError, TypeError, ValueError, AutotuneError) as exc:
        raise StorageError(f"study {study.study_name!r}: stored hosts are unreadable "
                           f"({type(exc).__name__}: {exc})") from None
    check_stored_cluster(cluster, f"study {study.study_name}")
    return cluster


def _check_libraries(req: ExportRequest, config: Config, stored, say: Say) -> None:
    """LD_PRELOAD paths come from the stored topology, which whoever writes the study chose:
    they must be this machine's own libraries (or the person says --trust-study)."""
    if not any(preloads(config, t) for t in stored):
        return
    local = probe().capabilities
    for warning in check_stored_libraries(config, stored, local, trusted=req.trust_study):
        say(f"autotune: warning: {warning}")


def _recommended(study: optuna.Study) -> tuple[Config, dict[str, Any]]:
    rec = StudyAttrs.of(study).recommendation
    if not rec:
        raise StorageError(f"study {study.study_name!r} has no recommendation (the search was "
                           "interrupted or is still running); `autotune report` lists trials "
                           "to export with --trial N")
    config = Config.from_dict(rec["config"], where="stored recommendation")
    return config, figure_fields(rec, config)


def _from_trial(study: optuna.Study, number: int, say: Say) -> tuple[Config, dict[str, Any]]:
    trials = study.get_trials(deepcopy=False)
    if not 0 <= number < len(trials):
        raise StorageError(f"--trial {number}: study {study.study_name!r} has trials "
                           f"0-{len(trials) - 1}" if trials else
                           f"--trial {number}: study {study.study_name!r} has no trials")
    if not has_record(trials[number]):
        raise StorageError(f"--trial {number}: no configuration stored on this trial")
    rec = record_of(trials[number])
    extra: dict[str, Any] = {"trial": number, "outcome": rec.outcome}
    if rec.outcome != Outcome.OK:
        say(f"autotune: warning: trial {number} did not complete ({rec.outcome}: "
            f"{one_line(rec.reason)}); exporting its configuration anyway")
    elif rec.throughput is not None:
        extra["throughput"] = rec.throughput
        default = next((d for d in records(study)
                        if d.role == Role.DEFAULT and d.outcome == Outcome.OK), None)
        if default is not None and default.throughput:
            ratio = rec.throughput / default.throughput
            extra["speedup"] = ratio
            extra["verified"] = False
            extra["headline"] = (f"trial {number}: {ratio:.2f}x the default launch in one "
                                 "search measurement (not verified)")
    return rec.config, extra
