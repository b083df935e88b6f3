"""`--hosts`, `--hostfile`, `--launcher`, `--ssh-config`, `--iface` for run, search and export."""
from __future__ import annotations

import argparse
import os
import sys

from ..errors import ConfigError
from ..plan.hosts import (LAUNCHERS, Host, other_slurm_task, parse_hostfile, parse_hosts,
                          slurm_hosts, within_allocation)


def add_host_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("across machines (see docs/clusters.md)")
    g.add_argument("--hosts", metavar="H1:SLOTS,H2:SLOTS",
                   help="run trials across these hosts (ssh names; slots = ranks a host may take). "
                        "In a SLURM allocation: the nodes to use, all of them by default, "
                        "slots from the CPUs the allocation gives each")
    g.add_argument("--hostfile", metavar="FILE",
                   help="hosts in the Open MPI / DeepSpeed format: one `host slots=N` per line")
    g.add_argument("--launcher", choices=LAUNCHERS,
                   help="what starts the ranks on the hosts: ssh (one shared connection per "
                        "host; the export: torchrun per host, c10d rendezvous), mpirun (Open "
                        "MPI) or srun (inside a SLURM allocation: each trial one `srun "
                        "--overlap` step on its nodes); default: srun in a SLURM allocation, "
                        "ssh otherwise")
    g.add_argument("--ssh-config", metavar="FILE", help="ssh -F FILE for every ssh (and mpirun's)")
    g.add_argument("--master-port", type=int, metavar="PORT",
                   help="rendezvous port on the first host (default: one free there per trial)")
    g.add_argument("--iface", metavar="NAME",
                   help="network interface for the collectives (GLOO_SOCKET_IFNAME, "
                        "NCCL_SOCKET_IFNAME, ...); default: the one holding the first host's "
                        "address")


def hosts_from_args(args: argparse.Namespace,
                    env: dict[str, str] | None = None) -> tuple[tuple[Host, ...], str] | None:
    """(hosts, launcher) the user asked for, or None for this machine alone. Inside a SLURM
    allocation srun is the default launcher, and the hosts named must be nodes of it."""
    env = dict(os.environ) if env is None else env
    if args.hosts and args.hostfile:
        raise ConfigError("give --hosts or --hostfile, not both")
    allocation = slurm_hosts(env)
    launcher = args.launcher or ("srun" if allocation else None)
    if args.hosts or args.hostfile:
        where = "--hosts" if args.hosts else f"--hostfile {args.hostfile}"
        hosts = parse_hosts(args.hosts) if args.hosts else _hostfile(args.hostfile)
        if launcher == "srun":
            if allocation is None:
                raise ConfigError("--launcher srun starts trials inside a SLURM allocation, and "
                                  "this is not one (no SLURM_JOB_NODELIST): run it in salloc or "
                                  "an sbatch script, or use --launcher ssh")
            hosts = within_allocation(hosts, allocation, where)
    elif allocation is not None and len(allocation) >= 2:
        hosts = allocation
    else:   # a one-node allocation is this machine: the single-host path, unchanged
        if args.launcher or args.ssh_config or args.iface or args.master_port:
            raise ConfigError("--launcher/--ssh-config/--iface/--master-port need --hosts "
                              "or --hostfile")
        return None
    if launcher == "srun" and args.ssh_config:
        raise ConfigError("--ssh-config is for ssh and mpirun, and trials start through srun "
                          "here (a SLURM allocation); add --launcher ssh to use ssh")
    if args.master_port is not None and not 0 < args.master_port < 65536:
        raise ConfigError(f"--master-port {args.master_port}: must be 1-65535")
    if args.ssh_config and not os.path.isfile(args.ssh_config):
        raise ConfigError(f"--ssh-config {args.ssh_config}: no such file")
    return hosts, launcher or "ssh"


def _hostfile(path: str) -> tuple[Host, ...]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError(f"--hostfile {path}: {exc.strerror}") from None
    return parse_hostfile(text, where=path)


def only_task_zero(command: str, env: dict[str, str] | None = None) -> bool:
    """False (after one line on stderr) in a SLURM task other than task 0: one search per
    allocation, however many tasks `srun` started it in."""
    note = other_slurm_task(dict(os.environ) if env is None else env, command)
    if note is not None:
        print(f"autotune: {note}", file=sys.stderr)
    return note is None


def cluster_from_args(args: argparse.Namespace):
    """The probed Cluster for --hosts/--hostfile/SLURM, or None (this machine only)."""
    asked = hosts_from_args(args)
    if asked is None:
        return None
    from ..run.remote import probe_cluster
    hosts, launcher = asked
    return probe_cluster(hosts, launcher=launcher, ssh_config=args.ssh_config, iface=args.iface,
                         master_port=args.master_port, say=lambda line: print(f"autotune: {line}", file=sys.stderr))
