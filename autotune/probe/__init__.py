"""The probe: the machine as the tuner sees it.

    probe()                      live machine -> Topology
    probe("/path/to/capture")    a captured (or hand-written) sysfs tree -> Topology
    capture("/path/to/dir")      write every file the probe reads, for later replay

Capture layout (a directory laid out like /sys, plus a few named files at its root):

    devices/system/cpu/online
    devices/system/cpu/cpuN/topology/{thread_siblings_list,core_cpus_list,physical_package_id}
    devices/system/node/online
    devices/system/node/nodeN/{cpulist,meminfo,distance}
    devices/system/node/nodeN/access0/initiators/{read_bandwidth,read_latency}   HMAT/CDAT
    devices/virtual/memory_tiering/memory_tierN/nodelist   the kernel's memory tiers
    kernel/mm/mempolicy/weighted_interleave/{nodeN,auto}    weighted-interleave weights
    cpuinfo                     /proc/cpuinfo
    affinity                    cpulist this process may run on (os.sched_getaffinity)
    cpu.max                     cgroup CPU limits, "QUOTA PERIOD" per level ("max 100000" = none)
    meminfo                     /proc/meminfo (only when the kernel has no NUMA nodes)
    nvidia-smi-query-gpu.csv    nvidia-smi --query-gpu=index,name,memory.total
                                           --format=csv,noheader,nounits
    nvidia-smi-topo-m.txt       nvidia-smi topo -m
    numa_balancing              /proc/sys/kernel/numa_balancing
    weighted_interleave.writable  "yes" when the weights may be written (root)
    capabilities.json           what the machine can do: torch's CUDA and backends, libraries,
                                tools (raw facts; captured.py)

Every file is optional except devices/system/cpu/online. On replay, a missing affinity means
"all online CPUs" and missing nvidia-smi files mean "no GPUs". Capabilities on replay are the
captured machine's (capabilities.json); a capture without that file gets this machine's, with
CUDA and NCCL assumed for the GPUs it lists (and a warning saying so).
"""
from __future__ import annotations

import dataclasses
import os

from ..errors import ProbeError
from .topology import Capabilities, Topology, TorchBuild
from . import collect as _collect
from . import gpu as _gpu
from . import parse as _parse
from .capabilities import build_capabilities
from . import collect_capabilities as _collect_caps
from . import captured as _captured
from .memory import parse_memory

__all__ = ["probe", "capture", "topology_from_files", "torch_build"]


def probe(sysfs_root: str | None = None, *, collect_capabilities: bool = True) -> Topology:
    """Probe the live machine, or replay the capture at `sysfs_root`."""
    # Sysfs first: a bad capture fails in milliseconds, before the slow capability checks.
    topo = topology_from_files(_collect.collect_machine(sysfs_root))
    if not collect_capabilities:
        return topo
    if sysfs_root is None:
        caps, cap_warnings = build_capabilities(_collect_caps.collect_capabilities(),
                                                num_gpus=len(topo.gpus))
    else:   # judged by what the captured machine can do, not by the one replaying it
        caps, cap_warnings = _captured.replay_capabilities(
            sysfs_root, len(topo.gpus), _collect_caps.collect_capabilities)
    return dataclasses.replace(topo, capabilities=caps, warnings=topo.warnings + cap_warnings)


def torch_build() -> TorchBuild:
    """The torch this process (and every trial it launches: they run sys.executable) uses."""
    return _parse.parse_torch_version(_collect.torch_version_file())


def topology_from_files(raw: _collect.RawMachine) -> Topology:
    """Pure: collected files -> Topology (capabilities left at their defaults)."""
    files, root = raw.files, raw.root
    online = _parse.parse_online(files, root=root)
    nodes, distances = _parse.parse_nodes(files, online, root=root)
    cores, sockets = _parse.parse_cores(files, online, nodes, root=root)
    usable = _parse.parse_usable(files, online, root=root)
    quota = (_parse.parse_cpu_max(files[_collect.CPU_MAX], where=f"{root}/{_collect.CPU_MAX}")
             if _collect.CPU_MAX in files else None)
    isa = _parse.parse_cpuinfo(files.get(_collect.CPUINFO, ""))
    warnings = []
    gpus, links = (), ()
    if _collect.GPU_QUERY in files:
        gpus = _gpu.parse_query(files[_collect.GPU_QUERY], where=f"{root}/{_collect.GPU_QUERY}")
        topo = (_gpu.parse_topo(files[_collect.GPU_TOPO], where=f"{root}/{_collect.GPU_TOPO}")
                if _collect.GPU_TOPO in files and gpus else None)
        gpus, links = _gpu.merge(gpus, topo, {n.id: n.cpus for n in nodes})
    if _collect.GPU_ERROR in files:
        warnings.append(f"nvidia-smi failed: {files[_collect.GPU_ERROR].strip()}")
    usable_cores = {c.cpus[0] for c in cores if any(cpu in set(usable) for cpu in c.cpus)}
    if quota is not None and quota < len(usable_cores):
        warnings.append(f"cgroup CPU quota is {quota:g} CPUs for {len(usable_cores)} usable cores: "
                        f"plans use at most {max(1, int(quota))} cores")
    memory = parse_memory(files, nodes, distances, isa.model_name, root=root,
                          numa_balancing=files.get(_collect.NUMA_BALANCING),
                          weights_writable=files.get(_collect.WEIGHTS_WRITABLE))
    return Topology(sockets=sockets, logical_cpus=online, cores=cores, numa_nodes=nodes,
                    distances=distances, usable_cpus=usable, cpu_quota=quota, isa=isa, gpus=gpus,
                    gpu_links=links, l3_domains=_parse.parse_l3(files, online, root=root),
                    capabilities=Capabilities(),
                    warnings=tuple(warnings), memory=memory)


def capture(dest_dir: str, *, sysfs_root: str | None = None) -> list[str]:
    """Write every file the probe reads into dest_dir (replayable with probe(dest_dir)).

    Returns the written paths. dest_dir must be new or empty. The capture is checked by parsing
    it before anything is written, so a capture that would not replay is never left behind.
    The live machine's capability facts go in with it; a capture of a capture copies its facts
    (never this machine's, which would be another machine's).
    """
    raw = _collect.collect_machine(sysfs_root)
    topology_from_files(raw)
    facts = (_collect_caps.collect_capabilities() if sysfs_root is None
             else _captured.read_facts(sysfs_root))
    files = dict(raw.files)
    if facts is not None:
        files[_captured.CAPABILITIES] = _captured.facts_text(facts)
    dest = os.path.abspath(dest_dir)
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise ProbeError(f"capture directory {dest}: exists and is not a directory")
    if os.path.isdir(dest) and os.listdir(dest):
        # Files left from another machine would be replayed as part of this one.
        raise ProbeError(f"capture directory {dest}: not empty; capture into a new directory")
    written = []
    try:
        for rel, text in sorted(files.items()):
            path = os.path.join(dest, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            written.append(path)
    except OSError as exc:
        raise ProbeError(f"capture directory {dest}: {exc.strerror or exc}") from None
    return written
