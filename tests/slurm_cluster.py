"""A throwaway SLURM cluster for the SLURM tests: a real slurmctld here and one real slurmd in
each namespace host of scripts/testhosts.sh (set `s`: sl1, sl2 on 10.231.78.0/24, beside the
multi-host tests' th1, th2), one munged on a private socket, everything in a temporary folder.

- Each slurmd runs as `slurmd -N slN` in its host's network and UTS namespaces under that host's
  CPUs (taskset), so a job step's tasks run there: sl1's on CPU 0, sl2's on CPU 1 of 2.
- No cgroup file system is needed or touched: ProctrackType=proctrack/linuxproc,
  TaskPlugin=task/none, JobAcctGatherType=jobacct_gather/none. slurmd 22.05 still initialises
  its cgroup plugin and refuses to start without a file system on /sys/fs/cgroup, so each slurmd
  runs in a private mount namespace with an empty tmpfs there (CgroupPlugin=cgroup/v1 reads
  nothing from it): the machine's own cgroups are neither needed nor seen.
- NodeAddr is each namespace's address and the node names resolve nowhere, as on clusters whose
  NodeName is not a DNS name: autotune reaches a node by its NodeAddr (`scontrol show node`).
- Every daemon runs in the foreground as a child of this process and is stopped by its pid;
  `testhosts.sh down` then ends whatever a job left in a namespace.

Needs root and Debian's slurm-wlm and munge (setup.sh --test installs them); without them the
tests skip, except under CI. By hand: `python tests/slurm_cluster.py` starts one, prints the
SLURM_CONF to export and keeps it until Ctrl-C.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from paths import REPO

SCRIPT = REPO / "scripts" / "testhosts.sh"
# Another set than `s` on 10.231.78 (two people running the SLURM tests on one machine at once):
# AUTOTUNE_SLURM_TESTHOSTS_TAG and AUTOTUNE_SLURM_TESTHOSTS_NET, as scripts/testhosts.sh takes them.
TAG = os.environ.get("AUTOTUNE_SLURM_TESTHOSTS_TAG", "s")
NET = os.environ.get("AUTOTUNE_SLURM_TESTHOSTS_NET", "10.231.78")
NAME = "sl"
NAMESPACES = (f"atth{TAG}1", f"atth{TAG}2")   # the namespaces of sl1, sl2
TOOLS = ("slurmctld", "slurmd", "munged", "srun", "sbatch", "salloc", "scontrol", "sinfo")
HOSTS_ENV = {"AUTOTUNE_TESTHOSTS_TAG": TAG, "AUTOTUNE_TESTHOSTS_NET": NET,
             "AUTOTUNE_TESTHOSTS_NAME": NAME}


@dataclass(frozen=True)
class Slurm:
    conf: str                       # SLURM_CONF for every client (srun, sbatch, scontrol)
    nodes: tuple[str, ...]          # sl1, sl2
    cpus: int                       # CPUs= of each node (what --exclusive allocates)
    folder: Path

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": self.conf}

    def run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True,
                              timeout=timeout)


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "a SLURM cluster on namespace hosts needs root (ip netns, slurmd)"
    lost = [t for t in TOOLS if not (shutil.which(t) or os.path.exists(f"/usr/sbin/{t}"))]
    if lost:
        return (f"{', '.join(lost)} not found (apt-get install slurm-wlm munge; "
                "setup.sh --test installs them)")
    return None


def _tool(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _conf(d: Path, nodes: tuple[str, ...], cpus: int) -> str:
    host = socket.gethostname().split(".")[0]
    lines = [
        "ClusterName=autotunetest", f"SlurmctldHost={host}({NET}.1)",
        f"SlurmctldPort={_free_port()}", "SlurmdPort=6818",
        "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge", "CredType=cred/munge",
        f"AuthInfo=socket={d}/munge.socket", f"StateSaveLocation={d}/state",
        f"SlurmdSpoolDir={d}/spool-%n", f"SlurmctldPidFile={d}/slurmctld.pid",
        f"SlurmdPidFile={d}/slurmd-%n.pid", f"SlurmctldLogFile={d}/slurmctld.log",
        f"SlurmdLogFile={d}/slurmd-%n.log",
        # no cgroups: processes tracked by parentage, tasks not bound or accounted by SLURM
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        "SwitchType=switch/none", "MpiDefault=none",
        "SchedulerType=sched/backfill", "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU", "ReturnToService=2", "MinJobAge=600",
        *(f"NodeName={n} NodeAddr={NET}.{10 + i} CPUs={cpus} State=UNKNOWN"
          for i, n in enumerate(nodes, 1)),
        "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
    ]
    (d / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")
    (d / "slurm.conf").write_text("\n".join(lines) + "\n")
    return str(d / "slurm.conf")


def _start(d: Path, nodes: tuple[str, ...], conf: str) -> list[subprocess.Popen[bytes]]:
    """munged, slurmctld and one slurmd per namespace host, each in the foreground."""
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    log = open(d / "daemons.log", "ab")   # noqa: SIM115 (the daemons write to it until stopped)
    procs = [subprocess.Popen([_tool("munged"), "-F", "-f", f"--socket={d}/munge.socket",
                               f"--key-file={key}", f"--log-file={d}/munged.log",
                               f"--pid-file={d}/munged.pid", f"--seed-file={d}/munged.seed"],
                              stdout=log, stderr=log)]
    for _ in range(100):
        if (d / "munge.socket").exists():
            break
        time.sleep(0.05)
    procs.append(subprocess.Popen([_tool("slurmctld"), "-D", "-f", conf], stdout=log, stderr=log))
    cpus = [line.split()[3] for line in (d / "hosts" / "hosts").read_text().splitlines()]
    for i, (node, mine) in enumerate(zip(nodes, cpus), 1):
        (d / f"spool-{node}").mkdir()
        inner = (f"hostname {node} && mount -t tmpfs autotune-no-cgroup /sys/fs/cgroup && "
                 f"exec {_tool('slurmd')} -D -f {conf} -N {node}")
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", f"atth{TAG}{i}", "unshare", "--uts", "--mount",
             "--propagation", "private", "taskset", "-c", mine, "sh", "-c", inner],
            stdout=log, stderr=log))
    return procs


def _wait_idle(slurm: Slurm, procs: list[subprocess.Popen[bytes]], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dead = [p.args[0] for p in procs if p.poll() is not None]
        if dead:
            raise RuntimeError(f"{dead} stopped: {_tail(slurm.folder)}")
        states = slurm.run("sinfo", "-h", "-N", "-o", "%N %t").stdout.split()
        if states[1::2] and all(s == "idle" for s in states[1::2]):
            return
        time.sleep(0.3)
    raise RuntimeError(f"SLURM nodes not idle after {timeout:.0f}s: {_tail(slurm.folder)}")


def _tail(d: Path) -> str:
    return " | ".join(f"{p.name}: {p.read_text(errors='replace')[-600:]}"
                      for p in sorted(d.glob("*.log")))


@contextlib.contextmanager
def slurm_cluster(n: int = 2) -> Iterator[Slurm]:
    """Yields a running cluster of `n` namespace nodes; stops and removes it afterwards."""
    why = _missing()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    d = Path(tempfile.mkdtemp(prefix="autotune-slurm-"))
    env = {**os.environ, **HOSTS_ENV, "AUTOTUNE_TESTHOSTS_DIR": str(d / "hosts")}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        up = subprocess.run([str(SCRIPT), "up", str(n)], env=env, capture_output=True,
                            text=True, timeout=180)
        if up.returncode != 0:
            raise RuntimeError(f"testhosts.sh up: {up.stderr.strip()[-800:]}")
        (d / "state").mkdir()
        nodes = tuple(f"{NAME}{i}" for i in range(1, n + 1))
        cpus = os.cpu_count() or 1
        slurm = Slurm(conf=_conf(d, nodes, cpus), nodes=nodes, cpus=cpus, folder=d)
        procs = _start(d, nodes, slurm.conf)
        _wait_idle(slurm, procs)
        yield slurm
    finally:
        for p in reversed(procs):      # slurmds, slurmctld, then munged
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        subprocess.run([str(SCRIPT), "down"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    import signal
    import sys
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with slurm_cluster() as cluster:
        print(f"SLURM on {', '.join(cluster.nodes)}: export SLURM_CONF={cluster.conf}  "
              "(Ctrl-C stops it)", flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
