"""The hosts a command's trials span: --hosts, --hostfile or a SLURM allocation, with the
launcher that starts ranks there, probed before the first trial (run, search)."""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import ConfigError
from ..plan.cluster import Cluster
from ..plan.hosts import (Host, check_argument, other_slurm_task, parse_hostfile, parse_hosts,
                          slurm_hosts, within_allocation)
from ..run.remote import probe_cluster
from .common import Say


@dataclass(frozen=True, kw_only=True)
class Hosts:
    """What the user asked for (all None: this machine alone, unless SLURM allocated more)."""
    hosts: str | None = None           # "H1:SLOTS,H2:SLOTS"
    hostfile: str | None = None        # Open MPI / DeepSpeed format
    launcher: str | None = None        # ssh, mpirun or srun
    ssh_config: str | None = None
    master_port: int | None = None
    iface: str | None = None


def asked_hosts(asked: Hosts, env: dict[str, str] | None = None
                ) -> tuple[tuple[Host, ...], str] | None:
    """(hosts, launcher) the user asked for, or None for this machine alone. Inside a SLURM
    allocation srun is the default launcher, and the hosts named must be nodes of it."""
    env = dict(os.environ) if env is None else env
    if asked.hosts and asked.hostfile:
        raise ConfigError("give --hosts or --hostfile, not both")
    allocation = slurm_hosts(env)
    launcher = asked.launcher or ("srun" if allocation else None)
    if asked.hosts or asked.hostfile:
        where = "--hosts" if asked.hosts else f"--hostfile {asked.hostfile}"
        hosts = parse_hosts(asked.hosts) if asked.hosts else _hostfile(asked.hostfile or "")
        if launcher == "srun":
            if allocation is None:
                raise ConfigError("--launcher srun starts trials inside a SLURM allocation, and "
                                  "this is not one (no SLURM_JOB_NODELIST): run it in salloc or "
                                  "an sbatch script, or use --launcher ssh")
            hosts = within_allocation(hosts, allocation, where)
    elif allocation is not None and len(allocation) >= 2:
        hosts = allocation
    else:   # a one-node allocation is this machine: the single-host path, unchanged
        if asked.launcher or asked.ssh_config or asked.iface or asked.master_port:
            raise ConfigError("--launcher/--ssh-config/--iface/--master-port need --hosts "
                              "or --hostfile")
        return None
    if launcher == "srun" and asked.ssh_config:
        raise ConfigError("--ssh-config is for ssh and mpirun, and trials start through srun "
                          "here (a SLURM allocation); add --launcher ssh to use ssh")
    if asked.master_port is not None and not 0 < asked.master_port < 65536:
        raise ConfigError(f"--master-port {asked.master_port}: must be 1-65535")
    check_argument("--ssh-config", asked.ssh_config)   # before any ssh is started with it
    if asked.ssh_config and not os.path.isfile(asked.ssh_config):
        raise ConfigError(f"--ssh-config {asked.ssh_config}: no such file")
    return hosts, launcher or "ssh"


def _hostfile(path: str) -> tuple[Host, ...]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError(f"--hostfile {path}: {exc.strerror}") from None
    return parse_hostfile(text, where=path)


def not_task_zero(command: str, env: dict[str, str] | None = None) -> str | None:
    """Why this process should not run `command` (a SLURM task other than task 0: one search
    per allocation, however many tasks `srun` started it in), else None."""
    return other_slurm_task(dict(os.environ) if env is None else env, command)


def probe_hosts(asked: Hosts, say: Say, results: str | None = None) -> Cluster | None:
    """The probed Cluster of the hosts asked for, or None (this machine only). `results`: the
    results folder every host must reach as this machine does (a HostError otherwise)."""
    found = asked_hosts(asked)
    if found is None:
        return None
    hosts, launcher = found
    return probe_cluster(hosts, launcher=launcher, ssh_config=asked.ssh_config,
                         iface=asked.iface, master_port=asked.master_port, results=results,
                         say=lambda line: say(f"autotune: {line}"))
