"""oneCCL's environment: the one owner of every CCL_* / FI_* variable autotune sets.

oneCCL reads its settings from the environment when the first communicator is made. The plan
puts them in each rank's environment (`rank_env`); a script started some other way (plain
torchrun, a paste of `export`) gets the required ones from `defaults` when the backend is
created, without overriding anything the user set.
"""
from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

from ...util.search_path import clean as clean_search_paths

# The knobs' values live in autotune/config.py (CCL_YIELDS, CCL_WORKER_AFFINITIES). CCL_YIELD:
# oneCCL's default, pause, busy-waits: with ranks and workers sharing cores a 4 KB all-reduce
# took 16 ms instead of 0.1 ms on 2 cores, so sched_yield is autotune's default.
# Every variable rank_env may set: the plan owns them, so an inherited value never changes a trial.
CCL_ENV = ("CCL_PROCESS_LAUNCHER", "CCL_LOCAL_RANK", "CCL_LOCAL_SIZE", "CCL_ATL_TRANSPORT",
           "CCL_ATL_SHM", "CCL_WORKER_COUNT", "CCL_YIELD", "CCL_WORKER_AFFINITY", "CCL_LOG_LEVEL",
           "CCL_KVS_IFACE", "FI_TCP_IFACE")


def rank_env(*, local_rank: int, local_size: int, workers: int, yield_mode: str,
             worker_cpus: tuple[int, ...] | None, iface: str | None = None) -> dict[str, str]:
    """What one rank needs, as a value for Popen(env=...). `worker_cpus` lists the oneCCL workers'
    cores of every rank on this host, in local-rank order (oneCCL picks its own slice by
    CCL_LOCAL_RANK); None leaves their placement to oneCCL."""
    env = {
        "CCL_PROCESS_LAUNCHER": "none",      # ranks are started by autotune/torchrun, not mpiexec
        "CCL_LOCAL_RANK": str(local_rank),   # without these two: "could not get local_idx/count"
        "CCL_LOCAL_SIZE": str(local_size),
        "CCL_ATL_TRANSPORT": "ofi",          # libfabric; the MPI transport would need Intel MPI
        "CCL_ATL_SHM": "1",                  # ranks on one host exchange through shared memory
        "CCL_WORKER_COUNT": str(workers),
        "CCL_YIELD": yield_mode,
        # oneCCL warns about every variable set away from its default, on every rank
        "CCL_LOG_LEVEL": "error",
    }
    if worker_cpus:
        env["CCL_WORKER_AFFINITY"] = ",".join(str(c) for c in worker_cpus)
    env.update(iface_env(iface or "lo"))
    return env


def iface_env(iface: str) -> dict[str, str]:
    """The interface oneCCL's key-value service and libfabric's tcp provider listen on."""
    return {"CCL_KVS_IFACE": iface, "FI_TCP_IFACE": iface}


def defaults(environ: dict[str, str], rank: int, size: int) -> dict[str, str]:
    """The variables a rank lacks, for a script started without autotune's plan: local rank and
    size from torchrun's variables, one worker that yields, the interface that reaches the master."""
    local_rank = int(environ.get("LOCAL_RANK", rank))
    local_size = int(environ.get("LOCAL_WORLD_SIZE", size))
    iface = environ.get("CCL_KVS_IFACE") or interface_towards(environ.get("MASTER_ADDR"))
    want = rank_env(local_rank=local_rank, local_size=local_size, workers=1,
                    yield_mode="sched_yield", worker_cpus=None, iface=iface)
    return {k: v for k, v in want.items() if k not in environ}


def interface_towards(address: str | None) -> str:
    """The local interface whose address the kernel would use to reach `address` ("lo" for a
    loopback or unknown master)."""
    if not address:
        return "lo"
    try:
        ip = socket.gethostbyname(address)
        if ipaddress.ip_address(ip).is_loopback:
            return "lo"
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((ip, 9))            # no packet is sent: this only picks a route
            mine = s.getsockname()[0]
        import psutil
        for name, addrs in psutil.net_if_addrs().items():
            if any(a.family == socket.AF_INET and a.address == mine for a in addrs):
                return name
    except (OSError, ValueError):
        pass
    return "lo"


def shim_dir() -> Path:
    """The folder holding the `oneccl_bindings_for_pytorch` stand-in; on PYTHONPATH, a script
    written for Intel's bindings imports it unmodified."""
    return Path(__file__).with_name("shim")


def script_env(environ: dict[str, str]) -> dict[str, str]:
    """PYTHONPATH with the shim first, for ranks running a user's script (not the built-in
    trainer, which registers the backend itself). Intel's package, where installed, is found
    first by the shim itself, which then steps aside."""
    parts = [str(shim_dir()),
             *filter(None, clean_search_paths(environ).get("PYTHONPATH", "").split(os.pathsep))]
    return {"PYTHONPATH": os.pathsep.join(dict.fromkeys(parts))}
