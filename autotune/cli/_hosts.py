"""`--hosts`, `--hostfile`, `--launcher`, `--ssh-config`, `--iface` for run, search and export."""
from __future__ import annotations

import argparse
import os
import sys

from ..errors import ConfigError
from ..plan.hosts import LAUNCHERS, Host, parse_hostfile, parse_hosts, slurm_hosts


def add_host_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("across machines (see docs/clusters.md)")
    g.add_argument("--hosts", metavar="H1:SLOTS,H2:SLOTS",
                   help="run trials across these hosts (ssh names; slots = ranks a host may take)")
    g.add_argument("--hostfile", metavar="FILE",
                   help="hosts in the Open MPI / DeepSpeed format: one `host slots=N` per line")
    g.add_argument("--launcher", choices=LAUNCHERS,
                   help="what starts the ranks on the hosts: ssh (torchrun per host, c10d "
                        "rendezvous), mpirun (Open MPI) or srun (inside a SLURM allocation); "
                        "default: srun in a SLURM allocation, ssh otherwise")
    g.add_argument("--ssh-config", metavar="FILE", help="ssh -F FILE for every ssh (and mpirun's)")
    g.add_argument("--master-port", type=int, metavar="PORT",
                   help="rendezvous port on the first host (default: one free there per trial)")
    g.add_argument("--iface", metavar="NAME",
                   help="network interface for the collectives (GLOO_SOCKET_IFNAME, "
                        "NCCL_SOCKET_IFNAME, ...); default: the one holding the first host's "
                        "address")


def hosts_from_args(args: argparse.Namespace,
                    env: dict[str, str] | None = None) -> tuple[tuple[Host, ...], str] | None:
    """(hosts, launcher) the user asked for, or None for this machine alone."""
    env = dict(os.environ) if env is None else env
    if args.hosts and args.hostfile:
        raise ConfigError("give --hosts or --hostfile, not both")
    launcher = args.launcher
    if args.hosts:
        hosts = parse_hosts(args.hosts)
    elif args.hostfile:
        try:
            with open(args.hostfile, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ConfigError(f"--hostfile {args.hostfile}: {exc.strerror}") from None
        hosts = parse_hostfile(text, where=args.hostfile)
    else:
        found = slurm_hosts(env)
        # A one-node allocation is this machine: the single-host path, unchanged.
        if not found or len(found) < 2:
            if launcher or args.ssh_config or args.iface or args.master_port:
                raise ConfigError("--launcher/--ssh-config/--iface/--master-port need --hosts "
                                  "or --hostfile")
            return None
        hosts, launcher = found, launcher or "srun"
    if args.master_port is not None and not 0 < args.master_port < 65536:
        raise ConfigError(f"--master-port {args.master_port}: must be 1-65535")
    if args.ssh_config and not os.path.isfile(args.ssh_config):
        raise ConfigError(f"--ssh-config {args.ssh_config}: no such file")
    return hosts, launcher or "ssh"


def cluster_from_args(args: argparse.Namespace):
    """The probed Cluster for --hosts/--hostfile/SLURM, or None (this machine only)."""
    asked = hosts_from_args(args)
    if asked is None:
        return None
    from ..run.remote import probe_cluster
    hosts, launcher = asked
    return probe_cluster(hosts, launcher=launcher, ssh_config=args.ssh_config, iface=args.iface,
                         master_port=args.master_port, say=lambda line: print(f"autotune: {line}", file=sys.stderr))
