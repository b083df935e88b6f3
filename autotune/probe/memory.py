"""Where memory lives: the kind, free memory, tier and speed of each NUMA node, the kernel's
weighted-interleave weights and whether automatic NUMA balancing is on. Pure parsers over the
collected files (collect.py), and the frozen values a Topology carries.

What tells the kinds apart, in the order it is trusted (docs/memory.md):
- the kernel's memory tiers (/sys/devices/virtual/memory_tiering/memory_tierN/nodelist): a
  smaller N is faster memory. CXL expanders onlined by dax/kmem land in a slower tier than the
  DRAM nodes (memory_tier22 against memory_tier4 on 6.x kernels);
- the firmware's performance table (HMAT; CDAT for CXL), which the kernel shows per node as
  nodeN/access0/initiators/{read_bandwidth,read_latency} (MiB/s, ns): a memory-only node much
  faster than its nearest CPU node's DRAM is HBM, much slower is CXL;
- the CPU: a Xeon CPU Max in flat mode shows its on-package HBM as memory-only nodes in the same
  tier as DDR, and without HMAT nothing else in sysfs says so.
A memory-only node none of these explains is taken as plain DRAM (a socket whose CPUs are
offline).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Mapping

from ..errors import ProbeError
from .cpulist import parse_cpulist

NODE_DIR = "devices/system/node"
TIER_DIR = "devices/virtual/memory_tiering"
WEIGHTS_DIR = "kernel/mm/mempolicy/weighted_interleave"
PERF = ("read_bandwidth", "read_latency")
KINDS = ("dram", "hbm", "cxl")
# How much faster or slower than its nearest CPU node's DRAM a memory-only node must read to be
# called HBM or CXL by the firmware's figures alone (HBM2e reads 4-5x a quadrant's DDR5, a CXL
# x16 device a fifth of a socket's DDR5; a margin keeps a DIMM population difference out).
_PERF_MARGIN = 1.5
_TIER = re.compile(rf"^{TIER_DIR}/memory_tier(\d+)/nodelist$")
_WEIGHT = re.compile(rf"^{WEIGHTS_DIR}/node(\d+)$")


@dataclass(frozen=True, kw_only=True)
class NodeMemory:
    """One NUMA node's memory as the probe sees it (its size is NumaNode.memory_bytes)."""
    id: int
    kind: str = "dram"                      # "dram" | "hbm" | "cxl"
    free_bytes: int | None = None           # MemFree when probed (not part of the fingerprint)
    tier: int | None = None                 # the kernel's memory tier (smaller: faster)
    read_bandwidth_mibs: int | None = None  # HMAT/CDAT in MiB/s, from the nearest initiator
    read_latency_ns: int | None = None


@dataclass(frozen=True, kw_only=True)
class WeightedInterleave:
    """/sys/kernel/mm/mempolicy/weighted_interleave: the kernel's per-node weights."""
    weights: tuple[tuple[int, int], ...]    # (node, weight), node order
    auto: bool | None = None                # the kernel computes them from bandwidth (6.16+)
    writable: bool = False                  # this user may write the node files

    def weight(self, node: int) -> int | None:
        return dict(self.weights).get(node)


@dataclass(frozen=True, kw_only=True)
class Memory:
    nodes: tuple[NodeMemory, ...] = ()
    weighted_interleave: WeightedInterleave | None = None   # None: the kernel has no interface
    numa_balancing: int | None = None       # /proc/sys/kernel/numa_balancing; None: unknown

    def node(self, nid: int) -> NodeMemory:
        return next((n for n in self.nodes if n.id == nid), NodeMemory(id=nid))

    def kind(self, nid: int) -> str:
        return self.node(nid).kind

    def nodes_of(self, kind: str) -> tuple[int, ...]:
        return tuple(n.id for n in self.nodes if n.kind == kind)

    def to_json(self) -> dict[str, Any]:
        wi = self.weighted_interleave
        return {"nodes": [{"id": n.id, "kind": n.kind, "free_bytes": n.free_bytes, "tier": n.tier,
                           "read_bandwidth_mibs": n.read_bandwidth_mibs,
                           "read_latency_ns": n.read_latency_ns} for n in self.nodes],
                "weighted_interleave": None if wi is None else {
                    "weights": {str(k): v for k, v in wi.weights}, "auto": wi.auto,
                    "writable": wi.writable},
                "numa_balancing": self.numa_balancing}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> "Memory":
        if not d:
            return cls()
        wi = d.get("weighted_interleave")
        return cls(nodes=tuple(NodeMemory(**{k: n.get(k) for k in ("id", "free_bytes", "tier",
                                                                    "read_bandwidth_mibs",
                                                                    "read_latency_ns")},
                                          kind=n.get("kind") or "dram")
                               for n in d.get("nodes", ())),
                   weighted_interleave=None if wi is None else WeightedInterleave(
                       weights=tuple(sorted((int(k), int(v))
                                            for k, v in wi.get("weights", {}).items())),
                       auto=wi.get("auto"), writable=bool(wi.get("writable"))),
                   numa_balancing=d.get("numa_balancing"))


def parse_memory(files: Mapping[str, str], nodes, distances, model_name: str, *, root: str,
                 numa_balancing: str | None = None, weights_writable: str | None = None) -> Memory:
    """Every memory fact from the collected files. `nodes`: the parsed NumaNodes (id, cpus),
    `distances`: their matrix in the same order."""
    tiers = parse_tiers(files, root=root)
    out = []
    for node in nodes:
        base = f"{NODE_DIR}/node{node.id}"
        perf = {name: _int_file(files, f"{base}/access0/initiators/{name}", root)
                for name in PERF}
        meminfo = files.get(f"{base}/meminfo")
        out.append(NodeMemory(id=node.id, free_bytes=parse_mem_free(meminfo) if meminfo else None,
                              tier=tiers.get(node.id), read_bandwidth_mibs=perf["read_bandwidth"],
                              read_latency_ns=perf["read_latency"]))
    kinds = classify(nodes, distances, out, model_name)
    return Memory(nodes=tuple(replace(n, kind=kinds[n.id]) for n in out),
                  weighted_interleave=parse_weighted_interleave(files, weights_writable,
                                                                root=root),
                  numa_balancing=parse_numa_balancing(numa_balancing, root=root))


def parse_mem_free(text: str) -> int | None:
    """Bytes of MemFree in a node's meminfo ("Node 0 MemFree:  123 kB"); None without the line."""
    m = re.search(r"^(?:Node\s+\d+\s+)?MemFree:\s*(\d+)\s*(kB)?\s*$", text, re.MULTILINE)
    return int(m.group(1)) * (1024 if m.group(2) else 1) if m else None


def parse_tiers(files: Mapping[str, str], *, root: str) -> dict[int, int]:
    """node -> memory tier number, from memory_tierN/nodelist (a cpulist of node ids)."""
    out: dict[int, int] = {}
    for path, text in files.items():
        m = _TIER.match(path)
        if m:
            for nid in parse_cpulist(text, where=f"{root}/{path}"):
                out[nid] = int(m.group(1))
    return out


def parse_weighted_interleave(files: Mapping[str, str], writable: str | None, *, root: str
                              ) -> WeightedInterleave | None:
    """The weights (1-255 per node), the auto mode and whether they may be written; None when
    the kernel has no weighted interleave (before 6.9)."""
    weights = []
    for path, text in files.items():
        m = _WEIGHT.match(path)
        if m:
            weights.append((int(m.group(1)), _int_text(text, f"{root}/{path}")))
    if not weights:
        return None
    # 6.16 named the file `auto`; kernels whose headers #define auto as __auto_type show it so
    auto_text = files.get(f"{WEIGHTS_DIR}/auto", files.get(f"{WEIGHTS_DIR}/__auto_type"))
    auto = None if auto_text is None else auto_text.strip().lower() in ("true", "1", "y")
    return WeightedInterleave(weights=tuple(sorted(weights)), auto=auto,
                              writable=(writable or "").strip() == "yes")


def parse_numa_balancing(text: str | None, *, root: str) -> int | None:
    """0 off, 1 on, 2 memory tiering only, 3 both (kernel.numa_balancing); None: not collected."""
    if text is None or not text.strip():
        return None
    return _int_text(text, f"{root}/numa_balancing")


def classify(nodes, distances, memory: list[NodeMemory], model_name: str) -> dict[int, str]:
    """node id -> "dram" | "hbm" | "cxl" (the module's docstring says which fact wins)."""
    by_id = {m.id: m for m in memory}
    cpu_nodes = [n.id for n in nodes if n.cpus]
    cpu_tiers = [by_id[n].tier for n in cpu_nodes if by_id[n].tier is not None]
    dram_tier = min(cpu_tiers) if cpu_tiers else None
    kinds = {}
    for node in nodes:
        kinds[node.id] = "dram" if node.cpus else _memory_only_kind(
            by_id[node.id], dram_tier, by_id.get(nearest_cpu_node(node.id, nodes, distances)),
            model_name)
    return kinds


def _memory_only_kind(mem: NodeMemory, dram_tier: int | None, near: NodeMemory | None,
                      model_name: str) -> str:
    if mem.tier is not None and dram_tier is not None and mem.tier != dram_tier:
        return "cxl" if mem.tier > dram_tier else "hbm"
    if near is not None and mem.read_bandwidth_mibs and near.read_bandwidth_mibs:
        if mem.read_bandwidth_mibs >= _PERF_MARGIN * near.read_bandwidth_mibs:
            return "hbm"
        if mem.read_bandwidth_mibs * _PERF_MARGIN <= near.read_bandwidth_mibs:
            return "cxl"
    if "cpu max" in model_name.lower():
        return "hbm"
    return "dram"


def nearest_cpu_node(nid: int, nodes, distances) -> int | None:
    """The node with CPUs closest to `nid` by SLIT distance (the lowest id on a tie); None when
    the machine has no distances or no CPU node."""
    ids = [n.id for n in nodes]
    cpu = [n.id for n in nodes if n.cpus]
    if not cpu:
        return None
    if nid in cpu:
        return nid
    if not distances or nid not in ids:
        return cpu[0]
    row = distances[ids.index(nid)]
    return min(cpu, key=lambda c: (row[ids.index(c)], c))


def _int_file(files: Mapping[str, str], path: str, root: str) -> int | None:
    return _int_text(files[path], f"{root}/{path}") if path in files else None


def _int_text(text: str, where: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ProbeError(f"{where}: expected an integer, got {text.strip()[:40]!r}") from None


__all__ = ["KINDS", "Memory", "NodeMemory", "WeightedInterleave", "classify",
           "nearest_cpu_node", "parse_memory"]
