"""Print the tuned launch command: environment (LD_PRELOAD, OMP/KMP variables), binding (numactl
or taskset), the launcher and the training command, shell-quoted, with a manifest (topology
fingerprint, library versions, measured speedup). The command is rebuilt from the topology stored
with the study, so it can be exported later and elsewhere; on a machine with a different topology
it warns, because the CPU binding may not fit there. Library paths stored with the study go into
LD_PRELOAD only when they are the files this machine's probe finds, and what a study stores that
runs code (a script's command, a module:function workload, the hosts, python, folder, ssh config
and environment of a search across hosts) is exported only when only you can write the storage:
otherwise export prints it with a short hash and stops until you add --trust-study HASH. Strings
from the study are written with control characters escaped.

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

from ..tune import FORMATS, STANDALONE_SECONDS, ExportRequest, export
from ._common import add_study_args, add_trust_arg, int_at_least, study_of, window_seconds


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=FORMATS, default="shell",
                   help="shell (env + binding per rank), torchrun (--nnodes/--rdzv-endpoint "
                        "per host across hosts), mpirun (one line, -x env, per-rank binding), "
                        "slurm (an sbatch script using srun), or json with the manifest "
                        "(default: shell; across hosts: the launcher the search used)")
    add_study_args(p)
    p.add_argument("--trial", type=int_at_least(0, "a trial number"), metavar="N",
                   help="export the configuration of trial N instead of the recommendation")
    p.add_argument("--seconds", type=window_seconds, default=STANDALONE_SECONDS, metavar="S",
                   help="how long the built-in trainer in the command runs (default: "
                        f"{STANDALONE_SECONDS:g})")
    add_trust_arg(p, "export what the study stores that runs code even though others can write "
                     "the storage, and library paths (LD_PRELOAD) that are not the files this "
                     "machine's probe finds (a study for another machine); a path holding ':', "
                     "a space or a control character is refused always")


def run(args: argparse.Namespace) -> int:
    text = export(ExportRequest(format=args.format, study=study_of(args), trial=args.trial,
                                seconds=args.seconds, trust_study=args.trust_study),
                  say=lambda line: print(line, file=sys.stderr))
    print(text)
    return 0
