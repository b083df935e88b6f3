"""The landscape model's memory (issue 37): where a rank's pages go under each mem_policy, and
each node's bandwidth and latency (benchmarks/landscapes/model.py uses these in step_seconds).

A rank's pages go to its policy's nodes as the real planner places them (autotune/plan/memory.py)
in the policy's proportions: equal for interleave, the kernel's weights for weighted, all on the
HBM node for preferred_fast (the CNN's pages fit its 16 GiB). A node's bandwidth is shared by
every rank whose pages are on it; its latency stalls the compute part as remote DRAM does.
"""
from __future__ import annotations

from typing import Any

from autotune.config import Config
from autotune.plan.memory import MemPlacement, rank_memory, wanted_weights
from autotune.plan.placement import placements
from autotune.probe.memory import nearest_cpu_node
from autotune.probe.topology import Topology

_MEMS: dict[tuple, tuple] = {}


def mem_layout(config: Config, topology: Topology) -> tuple[tuple[Any, dict], ...] | None:
    """Per rank: (the CPU node its threads run on, None when unbound; {memory node: share of
    its pages}) under a mem_policy other than local (None for local: the model as it was)."""
    if config.mem_policy == "local":
        return None
    key = (id(topology), config.nproc, config.ranks_per_numa_node, config.threads, config.binding,
           config.backend, config.mem_policy)
    if key in _MEMS:
        return _MEMS[key]
    bound = config.binding != "none"
    weights = wanted_weights(topology) if config.mem_policy == "weighted" else {}
    out = []
    for pl in placements(config, topology):
        placed = rank_memory(config, topology, pl, bound)
        if not isinstance(placed, MemPlacement):
            raise ValueError(f"{config.key()}: {placed}")
        nodes = placed.nodes
        raw = ({n: weights[n] for n in nodes} if placed.mode == "weighted"
               else {nodes[0]: 1.0} if placed.mode == "preferred" else {n: 1.0 for n in nodes})
        total = sum(raw.values())
        out.append((pl.node if bound else None, {n: w / total for n, w in raw.items()}))
    _MEMS[key] = tuple(out)
    return _MEMS[key]


def node_bandwidth(topology: Topology, hw, node: int) -> float:
    """Bytes/s a node's memory delivers: DRAM beside cores the vendor figure (what the local
    launch was always modelled with), memory-only nodes the firmware's HMAT/CDAT figure or
    Hardware.memory_only_gbs."""
    cpu = any(n.id == node and n.cpus for n in topology.numa_nodes)
    mibs = topology.memory.node(node).read_bandwidth_mibs
    if cpu or (not mibs and hw.memory_only_gbs is None):
        return hw.node_bandwidth_gbs * 1e9
    return mibs * 2**20 if mibs else hw.memory_only_gbs * 1e9


def _distance(topology: Topology, a: int, b: int) -> float:
    ids = [n.id for n in topology.numa_nodes]
    if not topology.distances or a not in ids or b not in ids:
        return 10.0
    return float(topology.distances[ids.index(a)][ids.index(b)])


def reach(topology: Topology, cpu: Any, node: int) -> float:
    """How much further `node` is from a rank on `cpu` (None: any compute node, averaged) than
    from its nearest CPU node, which its HMAT figures are for (SLIT distances)."""
    near = nearest_cpu_node(node, topology.numa_nodes, topology.distances)
    home = _distance(topology, near, node) if near is not None else 10.0
    cpus = [cpu] if cpu is not None else [n.id for n in topology.compute_nodes()]
    return sum(_distance(topology, c, node) for c in cpus) / len(cpus) / home


def latency_ratio(topology: Topology, cpu: Any, share: dict) -> float:
    """The rank's mean memory latency relative to its own DRAM: HMAT latencies where the
    capture has them, else SLIT distance / 10 (ACPI 6.x 5.2.17), as remote DRAM."""
    cpus = [cpu] if cpu is not None else [n.id for n in topology.compute_nodes()]
    mem = topology.memory
    total = 0.0
    for c in cpus:
        local = mem.node(c).read_latency_ns
        for node, f in share.items():
            lat = mem.node(node).read_latency_ns
            if local and lat:
                total += f * lat * reach(topology, c, node) / local
            else:
                total += f * _distance(topology, c, node) / 10.0
    return total / len(cpus)
