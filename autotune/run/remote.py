"""The outside world of multi-host trials: probing hosts, killing leftovers (running a cluster
plan: run/spanning.py).

`python -m autotune.run.remote facts [FOLDER NAME CONTENT]` prints the host's clock, Python and
autotune, and whether it reaches the results folder (run/host_facts.py).
`python -m autotune.run.remote kill MARKER [--ccl]` (run on a host over ssh) ends every process of
one trial there, and with --ccl also removes the shared memory oneCCL ranks that died there left
and mapped (comm/ccl/shm.py: a later rank given the same pid fails to start; a segment no process
of the trial maps, such as another container's, is never touched); `python -m autotune.run.remote
port [N]` prints a free TCP port (or checks N is free).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import psutil

from ..util.child_python import python_module
from ..comm.ccl.shm import remove_mapped_by
from ..errors import AutotuneError
from ..plan.hosts import (Host, differences, interface_of, kept_refusal, network_of,
                          node_address, ssh_hostname)
from ..plan.cluster import FORWARD, MARKER, Cluster
from ..util.checked_folder import CheckedFolder, FolderRefused, open_private
from ..util.search_path import child_env

_SSH_ERRORS = (  # (pattern in ssh's stderr, what to tell the user)
    (r"Connection refused", "ssh refused the connection (no sshd listening?)"),
    (r"No route to host|Network is unreachable|timed out|Connection timed out",
     "host unreachable"),
    (r"Could not resolve hostname", "host name does not resolve"),
    (r"Permission denied", "ssh login refused (keys? try: ssh HOST true)"),
)


class HostError(AutotuneError):
    """A host cannot be reached or used."""


def _launcher_missing(launcher: str) -> None:
    tool = {"ssh": "ssh", "mpirun": "mpirun", "srun": "srun"}[launcher]
    if shutil.which(tool) is None:
        pkg = {"ssh": "openssh-client", "mpirun": "openmpi-bin", "srun": "slurm-client"}[launcher]
        raise HostError(f"launcher {launcher}: `{tool}` not found on PATH (apt-get install {pkg})")
    if launcher == "mpirun" or launcher == "ssh":
        if shutil.which("ssh") is None:
            raise HostError("ssh not found on PATH (apt-get install openssh-client)")


def run_on(cluster: Cluster, host: str, *cmd: str, timeout: float = 60.0) -> str:
    """stdout of `cmd` on `host`; a HostError with the one-line reason otherwise."""
    argv = cluster.remote(host, *cmd)
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL, env=child_env())
    except subprocess.TimeoutExpired:
        raise HostError(f"host {host}: no answer within {timeout:g}s ({' '.join(cmd[:3])} ...)") \
            from None
    if p.returncode != 0:
        err = p.stderr.strip()
        for pattern, meaning in _SSH_ERRORS:
            if p.returncode == 255 and re.search(pattern, err):
                raise HostError(f"host {host}: {meaning}: {err.splitlines()[-1]}")
        last = err.splitlines()[-1] if err else f"exit code {p.returncode}"
        raise HostError(f"host {host}: `{' '.join(cmd[:4])}` failed: {last}")
    return p.stdout


def address_of(cluster: Cluster, host: str) -> str:
    """The IPv4 address this machine reaches `host` at (ssh config aliases resolved; under
    SLURM the node's NodeAddr, which is how SLURM reaches it when its name does not resolve)."""
    name = host.split("@")[-1]
    if cluster.launcher == "srun":
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(["scontrol", "show", "node", name], capture_output=True,
                                 text=True, timeout=30).stdout
            name = node_address(out) or name
    else:
        cfg = ("-F", cluster.ssh_config) if cluster.ssh_config else ()
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(["ssh", *cfg, "-G", host], capture_output=True, text=True,
                                 timeout=10).stdout
            name = ssh_hostname(out) or name
    try:
        return socket.getaddrinfo(name, None, socket.AF_INET)[0][4][0]
    except OSError:
        raise HostError(f"host {host}: name {name!r} does not resolve") from None


def probe_cluster(hosts: tuple[Host, ...], *, launcher: str = "ssh", ssh_config: str | None = None,
                  iface: str | None = None, python: str = sys.executable,
                  cwd: str | None = None, master_port: int | None = None,
                  results: str | None = None, say=lambda _line: None) -> Cluster:
    """Probe every host through the launcher; refuse hosts that differ (with the differences),
    and, given the `results` folder, hosts that do not reach it as this machine does. Launches
    are not kept between trials over hosts whose clock, Python or autotune differ (said once)."""
    from ..probe.topology import Topology
    _launcher_missing(launcher)
    cwd = cwd or os.getcwd()
    here = child_env()
    env = {k: here[k] for k in FORWARD if k in here}
    pending = Cluster(hosts=hosts, addresses=("0.0.0.0",) * len(hosts),
                      topologies=(None,) * len(hosts), launcher=launcher,  # type: ignore[arg-type]
                      ssh_config=ssh_config, python=python, cwd=cwd, env=env, iface=iface,
                      control_dir=ssh_control_dir(say) if launcher != "srun" else None)
    addresses = tuple(address_of(pending, h.name) for h in hosts)
    probes = {}
    for h in hosts:
        say(f"probing {h.name} ({launcher})")
        out = run_on(pending, h.name, *python_module("autotune", "probe", "--json", python=python))
        try:
            probes[h.name] = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise HostError(f"host {h.name}: probe printed no JSON: {out.strip()[-200:]!r}") \
                from None
    diff = differences(probes)
    if diff:
        raise HostError("hosts differ, refusing to plan them as one: " + "; ".join(diff[:6]))
    text = run_on(pending, hosts[0].name, "ip", "-o", "-4", "addr", "show")
    subnet = network_of(text, addresses[0])
    if iface is None:
        iface = interface_of(text, addresses[0])
        if iface is None:
            raise HostError(f"host {hosts[0].name}: no interface holds {addresses[0]}; "
                            "name the one for collectives with --iface")
    refusal = _kept_refusal(pending, results, say)
    return Cluster(hosts=hosts, addresses=addresses, subnet=subnet,
                   topologies=tuple(Topology.from_json(probes[h.name]) for h in hosts),
                   launcher=launcher, iface=iface, ssh_config=ssh_config, python=python, cwd=cwd,
                   env=env, master_port=master_port, control_dir=pending.control_dir,
                   kept_refusal=refusal)


def _kept_refusal(cluster: Cluster, results: str | None, say) -> str:
    """Why launches over these hosts are not kept ("" : they are); a HostError when a host does
    not reach the results folder as this machine does."""
    from .host_facts import gather
    from .trials_dir import trials_folder
    facts = gather(cluster, run_on, trials_folder(results) if results else None)
    for name, f in facts.items():
        if f.get("folder"):
            raise HostError(f"host {name} does not reach --results as this machine does: "
                            f"{f['folder']}; give --results a folder on a file system every "
                            "host shares, at the same path, as the same user "
                            "(docs/clusters.md)")
    refusal = kept_refusal(facts)
    if refusal:
        say(f"launches across these hosts are not kept between trials: {refusal}; each trial "
            "there starts afresh")
    return refusal


# The ssh control folder, held open while this process lives (ssh_control_dir)
_CONTROL: list[CheckedFolder] = []


def ssh_control_dir(say=lambda _line: None) -> str | None:
    """This user's folder for ssh's shared connections (0700, under the temp folder: a control
    socket's path must stay under ~100 bytes), judged as a trial folder is (every folder from the
    root down, once: util/checked_folder.py) and then used through its descriptor: the path ssh
    is given, /proc/PID/fd/N, resolves through this process's open folder whatever is renamed
    later. None, said in one line, where others could rename it: then every ssh makes its own
    connection, as before."""
    if _CONTROL:
        return f"/proc/{os.getpid()}/fd/{_CONTROL[0].fd}"
    path = os.path.join(tempfile.gettempdir(), f"autotune-ssh-{os.getuid()}")
    try:
        _CONTROL.append(open_private(path, create=True))
    except (FolderRefused, OSError) as exc:
        say(f"ssh connections are not shared between calls: {exc}")
        return None
    return f"/proc/{os.getpid()}/fd/{_CONTROL[0].fd}"


def free_port_on(cluster: Cluster) -> int:
    """A port free on the first host (where the rendezvous listens); the one the user named
    (--master-port) must be free there."""
    host, wanted = cluster.hosts[0].name, cluster.master_port
    cmd = python_module("autotune.run.remote", "port", *([str(wanted)] if wanted else []),
                        python=cluster.python)
    try:
        return int(run_on(cluster, host, *cmd).strip())
    except HostError as exc:
        if wanted and "in use" in str(exc):
            raise HostError(f"port {wanted} is in use on {host}; pick another --master-port") \
                from None
        raise


def _marked(marker: str) -> list[psutil.Process]:
    """The processes here whose environment carries this trial's marker."""
    out = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if proc.pid != os.getpid() and proc.environ().get(MARKER) == marker:
                out.append(proc)
    return out


def kill_marked(marker: str, grace: float = 3.0) -> list[int]:
    """SIGTERM, then SIGKILL, every process here whose environment carries this trial's marker."""
    def marked() -> list[psutil.Process]:
        return _marked(marker)
    victims = marked()
    for p in victims:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _gone, alive = psutil.wait_procs(victims, timeout=grace)
    for p in alive + marked():
        with contextlib.suppress(psutil.Error):
            p.kill()
    return [p.pid for p in victims]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["kill"] and len(args) >= 2 and args[1] and args[2:] in ([], ["--ccl"]):
        killed: list[int] = []
        if args[2:]:   # the segments the trial's processes map, removed once they are dead
            remove_mapped_by([p.pid for p in _marked(args[1])],
                             lambda: killed.extend(kill_marked(args[1])))
        else:
            killed = kill_marked(args[1])
        print(len(killed))
        return 0
    if args[:1] == ["facts"] and len(args) in (1, 4):
        from .host_facts import facts_here
        print(json.dumps(facts_here(tuple(args[1:]) if args[1:] else None)))  # type: ignore[arg-type]
        return 0
    if args[:1] == ["port"] and len(args) <= 2:
        with socket.socket() as s:
            try:
                s.bind(("", int(args[1]) if len(args) == 2 else 0))
            except OSError:
                print(f"port {args[1]} in use", file=sys.stderr)
                return 3
            print(s.getsockname()[1])
        return 0
    print("usage: python -m autotune.run.remote kill MARKER [--ccl] | port [N] | "
          "facts [FOLDER NAME CONTENT]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
