"""Launch commands through a cluster launcher (pure): mpirun, an sbatch script, torchrun per host.

Built from the same cluster plan the multi-host trials ran (multinode.build_cluster_plan with
export=True), so every rank binds, preloads and threads as measured. A single-machine study is
exported through the same code as a one-host cluster.
"""
from __future__ import annotations

import shlex
from dataclasses import replace

from ..util.clean import one_line
from ..config import Config
from ..plan.hosts import Host
from ..plan.cluster import Cluster, build_cluster_plan
from ..probe.topology import Topology

PORT = 29500


def local_cluster(topology: Topology, python: str) -> Cluster:
    """This machine as a one-host cluster (exports of a single-machine study)."""
    return Cluster(hosts=(Host(name="localhost"),), addresses=("127.0.0.1",),
                   topologies=(topology,), launcher="mpirun", python=python)


def _argv(config: Config, cluster: Cluster, launcher: str, program: tuple[str, ...]):
    # ssh and Open MPI's daemons start with a bare environment: PATH/PYTHONPATH as the trials
    # had them (Cluster.env) go into the command, or another autotune may be imported there.
    # (no shared ssh connection: the sockets are this search's, the command runs anywhere)
    plan = build_cluster_plan(config, replace(cluster, launcher=launcher, control_dir=None),
                              workdir=".", master_port=PORT, base_env=dict(cluster.env), trial_id="autotune",
                              program=program, export=True)
    return plan.launchers


def _q(args) -> str:
    return " ".join(shlex.quote(str(a)) for a in args)


def mpirun(config: Config, cluster: Cluster, program: tuple[str, ...]) -> str:
    """One complete `mpirun` line: -H hosts, -x environment, per-rank binding via the shim."""
    (_host, argv, _log), = _argv(config, cluster, "mpirun", program)
    return _q(argv)


def torchrun_hosts(config: Config, cluster: Cluster, program: tuple[str, ...]) -> str:
    """One `torchrun --nnodes N --rdzv-backend c10d` per host, started over ssh, in one subshell."""
    launchers = _argv(config, cluster, "ssh", program)
    body = [f"  {_q(argv)} &" for _host, argv, _log in launchers]
    # the address is stored with the study: one_line keeps it inside the comment
    return "\n".join([one_line(f"# {len(launchers)} host(s), c10d rendezvous at "
                               f"{cluster.addresses[0]}:{PORT}; each line starts one host's "
                               "torchrun"),
                      "(", "  trap 'kill 0' INT TERM", *body,
                      # the exit status of every host's torchrun, not `wait`'s 0
                      '  rc=0; for p in $(jobs -p); do wait "$p" || rc=$?; done; exit $rc', ")"])


def sbatch(config: Config, cluster: Cluster, program: tuple[str, ...]) -> str:
    """An sbatch script: the allocation's first node is the rendezvous, srun starts the ranks."""
    (_host, argv, _log), = _argv(config, cluster, "srun", program)
    per_host = config.nproc // config.nnodes
    cores = cluster.topologies[0].num_usable_cores()
    argv = [a for a in argv if not a.startswith(("MASTER_ADDR=", "MASTER_PORT="))]
    return "\n".join([
        "#!/bin/bash",
        "#SBATCH --job-name=autotune",
        f"#SBATCH --nodes={config.nnodes}",
        f"#SBATCH --ntasks-per-node={per_host}",
        f"#SBATCH --cpus-per-task={max(1, cores // per_host)}",
        "#SBATCH --exclusive",
        "set -euo pipefail",
        "# The first node of the allocation holds the rendezvous, at the address SLURM itself",
        "# reaches it by (its NodeAddr; the node's name where none is set).",
        'first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "addr=$(scontrol show node \"$first\" | sed -n 's/.*NodeAddr=\\([^ ]*\\).*/\\1/p')",
        'export MASTER_ADDR="${addr:-$first}"',
        f"export MASTER_PORT={PORT}",
        _q(argv)])
