"""Where GPU ranks run: one rank per GPU, and the CPUs each rank's host side is bound to (pure).

Rank r drives GPU r of the GPUs it may see: CUDA_VISIBLE_DEVICES lists the first `nproc` GPUs in
nvidia-smi order and CUDA_DEVICE_ORDER=PCI_BUS_ID makes CUDA number them the same way (CUDA's
default order is "fastest first", which on mixed boxes is not nvidia-smi's). Every rank sees the
same list and picks `cuda:LOCAL_RANK`, exactly as under `torchrun`, so an exported command runs
the measured launch.

The CPU side follows torchrun's `--numa-binding` modes (torch/numa/binding.py), computed here
from the probed topology instead of the live /sys, so that they can be measured and tested:
  node          every CPU of the NUMA node the rank's GPU hangs off
  socket        every CPU of that node's socket
  exclusive     the node's cores split evenly among the ranks whose GPUs are on it
  core-complex  one L3-sharing group of cores of that node per rank (wrapping when fewer groups)
`binding` names the tool that applies the set (numactl/taskset; `_smt` adds the SMT siblings,
which torchrun always includes). GPU ranks are never memory-bound: torchrun does not bind memory,
and CUDA's pinned host buffers fail outright when a strict membind node runs short.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..config import Config
from ..probe.topology import Core, Gpu, Topology

CUDA_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


@dataclass(frozen=True, kw_only=True)
class GpuRank:
    gpu: int                           # nvidia-smi index of the rank's GPU
    node: int | None                   # the GPU's NUMA node
    cores: tuple[Core, ...]            # the cores the rank is bound to (() when unbound)
    cpus: tuple[int, ...] | None       # the CPU set (None when unbound)
    threads: int | None                # intra-op threads


def gpu_problem(config: Config, topology: Topology) -> str | None:
    """Why a configuration's GPU knobs cannot work here, or None (also None for CPU configs)."""
    if config.device != "cuda":
        if config.pin_memory:
            return "pin_memory=true speeds copies to a GPU and needs device=cuda"
        if config.numa_binding != "none":
            return (f"numa_binding={config.numa_binding} places GPU ranks near their GPU and needs "
                    f"device=cuda; CPU ranks are placed by ranks_per_numa_node and binding")
        if config.backend == "nccl":
            return "backend nccl all-reduces GPU tensors only: it needs device=cuda"
        return None
    gpus = topology.gpus
    if not gpus:
        return "device=cuda: no NVIDIA GPU was found (nvidia-smi)"
    if not topology.capabilities.cuda:
        return "device=cuda: this torch cannot use CUDA (a CPU-only build, or no driver)"
    if config.nproc > len(gpus):
        return f"nproc={config.nproc} but only {len(gpus)} GPU(s): GPU trials run one rank per GPU"
    if config.ranks_per_numa_node is not None:
        return ("ranks_per_numa_node counts CPU ranks per NUMA node; GPU ranks follow their GPUs "
                "(use nproc for the number of GPUs)")
    if config.ipex == "on":
        return "ipex on: IPEX optimises CPU training; device=cuda trains on the GPU"
    if config.numa_binding != "none" and config.binding == "none":
        return (f"numa_binding={config.numa_binding} needs a tool to apply it: binding=numactl or "
                f"taskset (numactl_smt/taskset_smt include SMT siblings, as torchrun does)")
    try:
        gpu_ranks(config, topology)
    except ValueError as exc:
        return str(exc)
    return None


def visible_devices(config: Config, topology: Topology) -> str:
    """CUDA_VISIBLE_DEVICES of a GPU launch: the first nproc GPUs, rank order."""
    return ",".join(str(g.index) for g in sorted(topology.gpus, key=lambda g: g.index)[:config.nproc])


def cuda_env(config: Config, topology: Topology) -> dict[str, str]:
    return {"CUDA_VISIBLE_DEVICES": visible_devices(config, topology),
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def gpu_ranks(config: Config, topology: Topology) -> list[GpuRank]:
    """Each rank's GPU and CPU set. Raises ValueError (a one-line reason) when impossible."""
    gpus = [dataclasses.replace(g, numa_node=gpu_node(g, topology))
            for g in sorted(topology.gpus, key=lambda g: g.index)[:config.nproc]]
    mode = config.numa_binding
    if mode == "none":
        return [GpuRank(gpu=g.index, node=g.numa_node, cores=(), cpus=None, threads=config.threads)
                for g in gpus]
    for g in gpus:
        if g.numa_node is None:
            raise ValueError(f"numa_binding={mode}: GPU {g.index} has no NUMA node in "
                             f"nvidia-smi topo -m, so no CPUs are known to be near it")
    usable = topology.usable_cores()
    by_node = {n: [c for c in usable if c.node == n] for n in {g.numa_node for g in gpus}}
    for n, cores in by_node.items():
        if not cores:
            raise ValueError(f"numa_binding={mode}: no usable core on NUMA node {n}, where "
                             f"GPU(s) {', '.join(str(g.index) for g in gpus if g.numa_node == n)} "
                             f"hang")
    # Ranks on one node, in rank order: the index among them picks the slice or the L3 group.
    peers = {n: [g.index for g in gpus if g.numa_node == n] for n in by_node}
    sets: list[tuple[Core, ...]] = []
    for g in gpus:
        node_cores, mine = by_node[g.numa_node], peers[g.numa_node].index(g.index)
        if mode == "node":
            cores = node_cores
        elif mode == "socket":
            socket = node_cores[0].socket
            cores = [c for c in usable if c.socket == socket]
        elif mode == "exclusive":
            cores = _slice(node_cores, mine, len(peers[g.numa_node]), g.numa_node)
        else:
            cores = _core_complex(node_cores, mine, topology, g.numa_node)
        sets.append(tuple(cores))
    smt = config.binding.endswith("_smt")
    out = []
    for g, cores in zip(gpus, sets):
        cpus = tuple(sorted(c for core in cores for c in (core.cpus if smt else core.cpus[:1])))
        sharers = sum(1 for other in sets if other == cores)
        threads = config.threads
        if threads is None:
            threads = max(1, len(cpus) // sharers)  # torch would start one per visible CPU
        elif threads * sharers > len(cpus):
            raise ValueError(f"threads={threads} x {sharers} rank(s) sharing GPU {g.index}'s "
                             f"{len(cpus)} CPUs (numa_binding={mode}) oversubscribes them")
        out.append(GpuRank(gpu=g.index, node=g.numa_node, cores=cores, cpus=cpus, threads=threads))
    return out


def gpu_node(gpu: Gpu, topology: Topology) -> int | None:
    """The GPU's NUMA node; on a machine with a single compute node (most cloud VMs, where
    nvidia-smi prints N/A) it can only be that one."""
    if gpu.numa_node is not None:
        return gpu.numa_node
    nodes = topology.compute_nodes()
    return nodes[0].id if len(nodes) == 1 else None


def _slice(cores: list[Core], i: int, k: int, node: int | None) -> list[Core]:
    """Slice i of k of a node's cores; the first slices take one extra when uneven (as torch)."""
    if len(cores) < k:
        raise ValueError(f"numa_binding=exclusive: {k} GPU ranks on NUMA node {node} but only "
                         f"{len(cores)} usable core(s)")
    per, extra = divmod(len(cores), k)
    start = i * per + min(i, extra)
    return cores[start:start + per + (1 if i < extra else 0)]


def _core_complex(cores: list[Core], i: int, topology: Topology, node: int | None) -> list[Core]:
    """The i-th L3 group of the node (largest first, then lowest CPU), wrapping around."""
    if not topology.l3_domains:
        raise ValueError("numa_binding=core-complex: the probe found no L3 cache groups "
                         "(cpu*/cache/index3/shared_cpu_list), so core complexes are unknown")
    groups: dict[tuple[int, ...], list[Core]] = {}
    for domain in topology.l3_domains:
        members = [c for c in cores if c.cpus[0] in set(domain)]
        if members:
            groups[domain] = members
    if not groups:
        raise ValueError(f"numa_binding=core-complex: no L3 group among NUMA node {node}'s cores")
    ordered = sorted(groups.values(), key=lambda m: (-len(m), m[0].cpus[0]))
    return ordered[i % len(ordered)]
