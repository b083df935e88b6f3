"""`autotune export`: the tuned launch command, rebuilt from the topology stored with the study
(so it can be exported later and elsewhere), in the format the user's launcher takes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import optuna

from ..util.clean import one_line, printable
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
from ..study.stored_code import (check_stored_cluster, cluster_code, command_code,
                                 foreign_libraries, workload_code)
from ..study.trust import StoredCode, check_trusted, require_hash
from .common import Say, StudyRef, open_results, quiet


@dataclass(frozen=True, kw_only=True)
class ExportRequest:
    format: str = "shell"
    study: StudyRef = field(default_factory=StudyRef)
    trial: int | None = None               # a trial's configuration instead of the recommendation
    seconds: float = STANDALONE_SECONDS    # how long the built-in trainer in the command runs
    trust_study: str | None = None         # the hash of what a refusal showed (stored code)


def export(req: ExportRequest, *, say: Say = quiet) -> str:
    """The command as text (control characters escaped); `say` gets the warnings. What the
    study stores that runs code or chooses it is passed on only from a storage only this user
    can change, or under --trust-study with its hash (study/trust.py)."""
    require_hash(req.trust_study)
    opened = open_results(req.study)   # judged before it is read, and read as judged
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
    stored = command_code(program if template else ()) + workload_code(workload) + (
        cluster_code(cluster) if cluster else StoredCode())
    manifest["provenance"] = {"from": opened.provenance.shown,   # read by launch --config
                              "why": opened.provenance.why if stored else None}
    _check_trusted(req, f"study {study.study_name}", stored, opened.provenance.why, config,
                   cluster.topologies if cluster else (topology,), say)
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
    check_stored_cluster(attrs.cluster_json, f"study {study.study_name}")
    try:
        return cluster_from_json(attrs.cluster_json)
    except (KeyError, TypeError, ValueError, AutotuneError) as exc:
        raise StorageError(f"study {study.study_name!r}: stored hosts are unreadable "
                           f"({type(exc).__name__}: {exc})") from None


def _check_trusted(req: ExportRequest, source: str, stored: StoredCode, why: str | None,
                   config: Config, topologies, say: Say) -> None:
    """The study's code-carrying fields pass only from a storage only this user can change, and
    LD_PRELOAD paths from the stored topology only when they are this machine's own libraries;
    else both only under --trust-study with the hash of exactly them."""
    libraries, foreign = StoredCode(), []
    if any(preloads(config, t) for t in topologies):
        libraries, foreign = foreign_libraries(config, topologies, probe().capabilities)
    why = (why if stored else None) or (
        f"stored {foreign[0]}; refusing to put it in LD_PRELOAD" if foreign else None)
    code = stored + libraries
    check_trusted(code, source, why, req.trust_study, action="export")
    for problem in foreign:
        say(f"autotune: warning: {problem}; exported as stored (--trust-study {code.digest()})")


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
