"""Where each rank's memory lives (pure): the `mem_policy` knob as numactl memory flags per rank,
which policies this machine offers, and why one cannot run here.

A rank's nodes are the NUMA nodes of its CPUs (a bound rank: its own node; an unbound rank: every
node with usable CPUs) and the memory-only nodes nearest to them (HBM of its quadrant, the CXL
expander of its socket). Per policy, with numactl:
  local           --membind=<its node> under binding=numactl, as every launch before the knob
                  (unbound ranks: the kernel's first touch); offered everywhere
  interleave      --interleave=<its nodes>: pages round-robin over them (needs two or more)
  preferred_fast  --preferred=<its HBM node>: HBM first; when it is full the kernel falls back by
                  distance from that node
  weighted        --weighted-interleave=<its DRAM and CXL nodes>, with the kernel's per-node
                  weights (/sys/kernel/mm/mempolicy/weighted_interleave) set from the nodes'
                  read bandwidths (HMAT/CDAT), or the kernel's own in its auto mode
taskset cannot set a memory policy, so a policy other than local needs binding=numactl or none.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import Config
from ..probe.memory import nearest_cpu_node
from ..probe.parse import format_cpulist
from ..probe.topology import Topology
from .placement import Placement

WEIGHTS_DIR = "/sys/kernel/mm/mempolicy/weighted_interleave"
# mem_policy -> the numactl policy it becomes (bind.py spells each as flags)
_MODES = {"interleave": "interleave", "preferred_fast": "preferred", "weighted": "weighted"}
_MAX_WEIGHT = 255   # the kernel's limit for a node's weight


@dataclass(frozen=True)
class MemPlacement:
    """One rank's memory policy: a numactl mode and its nodes."""
    mode: str                   # "interleave" | "preferred" | "weighted"
    nodes: tuple[int, ...]

    def spec(self) -> str:
        """'interleave:0,4': how plans, exports and the bind shim carry it (bind.mem_flags)."""
        return f"{self.mode}:{format_cpulist(self.nodes)}"


def rank_nodes(node: int | None, topology: Topology, bound: bool) -> tuple[int, ...]:
    """The nodes a rank's memory may use: its CPUs' nodes and the memory-only nodes nearest."""
    cpu_nodes = ([node] if bound and node is not None
                 else [n.id for n in topology.compute_nodes()] or [n.id for n in topology.numa_nodes
                                                                   if n.cpus])
    near = [n.id for n in topology.numa_nodes if n.memory_only
            and nearest_cpu_node(n.id, topology.numa_nodes, topology.distances) in cpu_nodes]
    return tuple(sorted(set(cpu_nodes) | set(near)))


def rank_memory(config: Config, topology: Topology, pl: Placement, bound: bool
                ) -> MemPlacement | str | None:
    """The rank's placement under config.mem_policy, None for local (the plan's --membind as
    before), or why it has none (one line)."""
    policy = config.mem_policy
    if policy == "local":
        return None
    nodes = rank_nodes(pl.node, topology, bound)
    kinds = {n: topology.memory.kind(n) for n in nodes}
    if policy == "interleave":
        chosen = nodes
    elif policy == "preferred_fast":
        chosen = tuple(n for n in nodes if kinds[n] == "hbm")
        if len(chosen) > 1:
            return (f"mem_policy=preferred_fast: an unbound rank spans HBM nodes "
                    f"{format_cpulist(chosen)}; bind the ranks (binding=numactl) so each prefers "
                    "its own")
    else:
        chosen = tuple(n for n in nodes if kinds[n] in ("dram", "cxl"))
        if not any(kinds[n] == "cxl" for n in chosen):
            chosen = ()
    where = f"node {pl.node}" if bound and pl.node is not None else "every node"
    if policy != "preferred_fast" and len(chosen) < 2:
        return (f"mem_policy={policy}: a rank on {where} has {_count(chosen or nodes)} to "
                f"{'interleave over' if policy == 'interleave' else 'weigh DRAM against CXL'}")
    if not chosen:
        return f"mem_policy=preferred_fast: no HBM node is near a rank on {where}"
    return MemPlacement(_MODES[policy], chosen)


def _count(nodes: tuple[int, ...]) -> str:
    return f"only node {format_cpulist(nodes)}" if len(nodes) == 1 else \
        f"nodes {format_cpulist(nodes)}"


def memory_problem(config: Config, topology: Topology, placements: list[Placement]) -> str | None:
    """Why config.mem_policy cannot place these ranks' memory here (None: it can)."""
    policy = config.mem_policy
    if policy == "local":
        return None
    why = policy_unavailable(policy, topology)
    if why:
        return f"mem_policy={policy}: {why}"
    if config.device == "cuda":
        return (f"mem_policy={policy}: GPU ranks keep their host memory where torchrun leaves it "
                "(pinned buffers fail when a policy's nodes run short)")
    if config.binding.startswith("taskset"):
        return (f"mem_policy={policy}: taskset binds CPUs only and cannot set a memory policy; "
                "use binding=numactl or none")
    bound = config.binding != "none"
    for pl in placements:
        placed = rank_memory(config, topology, pl, bound)
        if isinstance(placed, str):
            return placed
    return None


def policy_unavailable(policy: str, topology: Topology) -> str | None:
    """Why no configuration of this machine can use `policy` (None: some can). The space's
    `found_mem_policies`, its notes and every trial's check read this."""
    if policy == "local":
        return None
    if policy == "preferred_fast" and not topology.memory.nodes_of("hbm"):
        return f"the probe found no high-bandwidth memory ({found(topology)})"
    if policy == "weighted" and not topology.memory.nodes_of("cxl"):
        return f"the probe found no CXL (slower-tier) memory ({found(topology)})"
    if len(topology.numa_nodes) < 2:
        return f"the probe found one NUMA node ({found(topology)}): nothing to interleave over"
    if not topology.capabilities.numactl_membind:
        return "numactl cannot set memory policies here (missing, or set_mempolicy is blocked)"
    if policy == "weighted":
        return weighted_problem(topology)
    return None


def found(topology: Topology) -> str:
    """What memory the probe found, by kind: 'DRAM on nodes 0-1, CXL on nodes 2-3'."""
    parts = []
    for kind in ("dram", "hbm", "cxl"):
        ids = topology.memory.nodes_of(kind) or (
            tuple(n.id for n in topology.numa_nodes) if kind == "dram" and not
            topology.memory.nodes else ())
        if ids:
            parts.append(f"{kind.upper()} on node{'s' if len(ids) > 1 else ''} "
                         f"{format_cpulist(ids)}")
    return ", ".join(parts) or "no NUMA information"


def weighted_problem(topology: Topology) -> str | None:
    """Why DRAM:CXL weighted interleave cannot run on a machine with CXL memory (None: it can,
    the weights being right already or writable)."""
    wi = topology.memory.weighted_interleave
    if wi is None:
        return ("this kernel has no weighted interleave "
                "(/sys/kernel/mm/mempolicy/weighted_interleave, Linux 6.9+)")
    if not topology.capabilities.numactl_weighted:
        return "numactl has no --weighted-interleave (numactl 2.0.19+)"
    wanted = wanted_weights(topology)
    if wanted is None:
        return "the firmware gives no read bandwidth (HMAT/CDAT) for the nodes to weigh them by"
    stale = [n for n, w in sorted(wanted.items()) if wi.weight(n) != w]
    if stale and not wi.writable:
        return (f"{WEIGHTS_DIR}/node{stale[0]} is not writable by this user (weights "
                f"{_weights_text(dict(wi.weights), wanted)}, wanted {_weights_text(wanted)}); "
                "run as root, or write them yourself: " + weight_commands(wanted, stale))
    return None


def wanted_weights(topology: Topology) -> dict[int, int] | None:
    """node -> weight for every DRAM and CXL node: the kernel's own in its auto mode, else read
    bandwidth relative to the slowest node (307.2 against 51.2 GB/s: 6 to 1), 1 to 255."""
    wi, mem = topology.memory.weighted_interleave, topology.memory
    nodes = mem.nodes_of("dram") + mem.nodes_of("cxl")
    if wi is not None and wi.auto:
        return {n: w for n, w in wi.weights if n in nodes}
    bandwidth = {n: mem.node(n).read_bandwidth_mibs for n in nodes}
    if not nodes or not all(bandwidth.values()):
        return None
    slowest = min(bandwidth.values())
    return {n: max(1, min(_MAX_WEIGHT, round(b / slowest))) for n, b in sorted(bandwidth.items())}


def _weights_text(weights: dict[int, int], only: dict[int, int] | None = None) -> str:
    return " ".join(f"{n}:{w}" for n, w in sorted(weights.items()) if only is None or n in only)


def weight_commands(wanted: dict[int, int], nodes=None) -> str:
    """The shell that sets the weights, for a person with root: 'echo 6 > .../node0; ...'."""
    return "; ".join(f"echo {wanted[n]} > {WEIGHTS_DIR}/node{n}"
                     for n in (nodes if nodes is not None else sorted(wanted)))


def stale_weights(topology: Topology) -> str | None:
    """Why the weights are not what mem_policy=weighted wants on a host autotune does not write
    them on (another host of a cluster); None when they are."""
    wanted, wi = wanted_weights(topology), topology.memory.weighted_interleave
    stale = sorted(n for n, w in (wanted or {}).items() if wi is None or wi.weight(n) != w)
    if not stale:
        return None
    return ("mem_policy=weighted across hosts: set the weights on each host first (as root): "
            + weight_commands(wanted, stale))


def offered(topology: Topology) -> tuple[str, ...]:
    """The policies a space may search here: local, and each other one some rank could use."""
    return ("local",) + tuple(p for p in _MODES if policy_unavailable(p, topology) is None)


__all__ = ["MemPlacement", "WEIGHTS_DIR", "found", "memory_problem", "offered",
           "policy_unavailable", "rank_memory", "rank_nodes", "wanted_weights",
           "weight_commands"]
