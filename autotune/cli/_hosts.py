"""`--hosts`, `--hostfile`, `--launcher`, `--ssh-config`, `--iface` for run, search and export."""
from __future__ import annotations

import argparse
import sys

from ..tune import LAUNCHERS, Hosts, not_task_zero


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


def hosts_of(args: argparse.Namespace) -> Hosts:
    return Hosts(hosts=args.hosts, hostfile=args.hostfile, launcher=args.launcher,
                 ssh_config=args.ssh_config, master_port=args.master_port, iface=args.iface)


def only_task_zero(command: str, env: dict[str, str] | None = None) -> bool:
    """False (after one line on stderr) in a SLURM task other than task 0: one search per
    allocation, however many tasks `srun` started it in."""
    note = not_task_zero(command, env)
    if note is not None:
        print(f"autotune: {note}", file=sys.stderr)
    return note is None
