"""Print the tuned launch command: environment (LD_PRELOAD, OMP/KMP variables), binding (numactl
or taskset), the launcher and the training command, shell-quoted, with a manifest (topology
fingerprint, library versions, measured speedup). The command is rebuilt from the topology stored
with the study, so it can be exported later and elsewhere; on a machine with a different topology
it warns, because the CPU binding may not fit there. Library paths stored with the study go into
LD_PRELOAD only when they are the files this machine's probe finds (--trust-study: a study for
another machine), and strings from the study are written with control characters escaped.

examples:
  autotune export                          the verified recommendation, as a shell command
  autotune export --format torchrun        the same through torch.distributed.run
  autotune export --format json > launch.json
  autotune export --format mpirun          one Open MPI line: -H hosts, -x env, per-rank binding
  autotune export --format slurm > job.sh  an sbatch script (srun); sbatch job.sh
  autotune export --trial 12               the configuration trial 12 measured
"""
from __future__ import annotations

import argparse
import sys

from ..clean import one_line, printable
from ..result import Outcome
from ..config import DEFAULT_WORKLOAD, Config
from ..study.records import Role, has_record, record_of, records
from ..errors import AutotuneError, StorageError
from ..export.command import FORMATS, launch_command, render, training_command
from ..plan.launch_plan import STANDALONE_SECONDS
from ..probe.topology import Topology
from ..export.recommendation import script_launch
from ..study.attrs import StudyAttrs
from ._common import (add_study_args, add_trust_arg, int_at_least, open_study_from_args,
                      positive_float)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=FORMATS, default="shell",
                   help="shell (env + binding per rank), torchrun (--nnodes/--rdzv-endpoint "
                        "per host across hosts), mpirun (one line, -x env, per-rank binding), "
                        "slurm (an sbatch script using srun), or json with the manifest "
                        "(default: shell; across hosts: the launcher the search used)")
    add_study_args(p)
    p.add_argument("--trial", type=int_at_least(0, "a trial number"), metavar="N",
                   help="export the configuration of trial N instead of the recommendation")
    p.add_argument("--seconds", type=positive_float, default=STANDALONE_SECONDS, metavar="S",
                   help="how long the built-in trainer in the command runs (default: "
                        f"{STANDALONE_SECONDS:g})")
    add_trust_arg(p, "export the allocator and OpenMP library paths stored with the study (its "
                     "LD_PRELOAD) even when they are not the files this machine's probe finds "
                     "(a study for another machine); a path holding ':', a space or a control "
                     "character is refused always; see docs/security.md")


def run(args: argparse.Namespace) -> int:
    study, _, notes = open_study_from_args(args)
    attrs = StudyAttrs.of(study)
    if not attrs.described:
        raise StorageError(f"study {study.study_name!r} has no stored topology: not written by "
                           "`autotune search`")
    try:
        topology = Topology.from_json(attrs.topology_json)
    except (KeyError, TypeError, ValueError) as exc:
        raise StorageError(f"study {study.study_name!r}: stored topology is unreadable "
                           f"({type(exc).__name__}: {exc})") from None
    workload = str(attrs.workload or DEFAULT_WORKLOAD)
    manifest = {"study": study.study_name, "fingerprint": attrs.fingerprint,
                "machine": topology.isa.describe(), "workload": workload,
                "library_versions": attrs.library_versions}
    if args.trial is None:
        config, extra = _recommended(study)
    else:
        config, extra = _from_trial(study, args.trial)
    manifest.update(extra)
    template = attrs.script_command
    script = {}
    if template:  # script mode: the user's own invocation, with the tuned values filled in
        from ..script.template import fill
        program = fill(tuple(template), config)
        script = script_launch(attrs)
    else:
        program = training_command(workload, config, seconds=args.seconds)
    cluster = None
    if attrs.cluster_json:   # a study across hosts: the commands start every host
        from ..plan.cluster import cluster_from_json
        try:
            cluster = cluster_from_json(attrs.cluster_json)
        except (KeyError, TypeError, ValueError, AutotuneError) as exc:
            raise StorageError(f"study {study.study_name!r}: stored hosts are unreadable "
                               f"({type(exc).__name__}: {exc})") from None
        from ..study.trust import check_stored_cluster
        check_stored_cluster(cluster, f"study {study.study_name}")
    _check_libraries(args, config, cluster.topologies if cluster else (topology,))
    cmd = launch_command(config, topology, workload=workload, program=program, manifest=manifest,
                         cluster=cluster, **script)
    if cluster is None:   # across hosts the command runs there, not here
        for note in notes:   # a command tuned elsewhere may bind CPUs or load libraries wrongly
            print(f"autotune: warning: {one_line(note)}", file=sys.stderr)
    text = render(cmd, args.format)
    if printable(text) != text:   # a control character in the stored command's arguments
        print("autotune: warning: the stored command holds control characters; they are "
              "shown escaped (\\x..), so check it before you run it", file=sys.stderr)
    print(printable(text))
    return 0


def _check_libraries(args: argparse.Namespace, config: Config, stored) -> None:
    """LD_PRELOAD paths come from the stored topology, which whoever writes the study chose:
    they must be this machine's own libraries (or the person says --trust-study)."""
    from ..plan.build import preloads
    from ..study.trust import check_stored_libraries
    if not any(preloads(config, t) for t in stored):
        return
    from ..probe import probe
    local = probe().capabilities
    for warning in check_stored_libraries(config, stored, local, trusted=args.trust_study):
        print(f"autotune: warning: {warning}", file=sys.stderr)


def _recommended(study) -> tuple[Config, dict]:
    rec = StudyAttrs.of(study).recommendation
    if not rec:
        raise StorageError(f"study {study.study_name!r} has no recommendation (the search was "
                           "interrupted or is still running); `autotune report` lists trials "
                           "to export with --trial N")
    config = Config.from_dict(rec["config"], where="stored recommendation")
    return config, {"headline": rec.get("headline"), "speedup": rec.get("speedup"),
                    "spread": rec.get("spread"), "verified": rec.get("verified"),
                    "vs_run_cpu": rec.get("vs_run_cpu")}


def _from_trial(study, number: int) -> tuple[Config, dict]:
    trials = study.get_trials(deepcopy=False)
    if not 0 <= number < len(trials):
        raise StorageError(f"--trial {number}: study {study.study_name!r} has trials "
                           f"0-{len(trials) - 1}" if trials else
                           f"--trial {number}: study {study.study_name!r} has no trials")
    if not has_record(trials[number]):
        raise StorageError(f"--trial {number}: no configuration stored on this trial")
    rec = record_of(trials[number])
    extra = {"trial": number, "outcome": rec.outcome}
    if rec.outcome != Outcome.OK:
        print(f"autotune: warning: trial {number} did not complete ({rec.outcome}: "
              f"{one_line(rec.reason)}); exporting its configuration anyway", file=sys.stderr)
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
