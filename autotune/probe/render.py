"""The machine as `autotune probe` shows it to a person: a compact table (pure)."""
from __future__ import annotations

from .gpu import all_nvlink
from .parse import format_cpulist
from .topology import Topology

GIB = 1024 ** 3


def render(t: Topology, *, source: str | None = None) -> str:
    """The compact human table."""
    out = [f"machine      {source or 'this machine'} (fingerprint {t.fingerprint()})",
           f"cpu          {t.isa.describe()}; "
           f"isa: {' '.join(t.isa.flags) or 'none of interest'}",
           f"sockets      {t.sockets}"]
    out += _cpu_lines(t) + _numa_lines(t) + _gpu_lines(t) + _capability_lines(t)
    if t.warnings:
        out.append("warnings")
        out += [f"  - {w}" for w in t.warnings]
    return "\n".join(out)


def _cpu_lines(t: Topology) -> list[str]:
    usable = t.usable_cores()
    quota = f", cgroup quota {t.cpu_quota:g} CPUs" if t.cpu_quota is not None else ""
    smt = next((c for c in t.cores if len(c.cpus) > 1), None)
    return [f"cpus         {len(t.cores)} physical cores, {len(t.logical_cpus)} logical CPUs "
            f"online; usable: {len(usable)} cores / {len(t.usable_cpus)} CPUs "
            f"({format_cpulist(t.usable_cpus)}){quota} -> plans use {t.num_usable_cores()} "
            "cores",
            f"smt          siblings e.g. {'/'.join(map(str, smt.cpus))} (up to "
            f"{max(len(c.cpus) for c in t.cores)} threads per core)" if smt else
            "smt          off (1 thread per core)"]


def _numa_lines(t: Topology) -> list[str]:
    """Each node: its size, free memory, kind and CPUs; the distances; then where memory may be
    placed (weighted interleave) and whether the kernel moves pages (numa_balancing); the L3
    groups."""
    out = ["numa nodes"]
    for n in t.numa_nodes:
        mem = t.memory.node(n.id)
        facts = [mem.kind.upper()] + ([] if mem.free_bytes is None else
                                      [f"{mem.free_bytes / GIB:.1f} GiB free"])
        facts += [] if mem.tier is None else [f"tier {mem.tier}"]
        if mem.read_bandwidth_mibs and mem.read_latency_ns:
            facts.append(f"{mem.read_bandwidth_mibs * 2**20 / 1e9:.1f} GB/s, "
                         f"{mem.read_latency_ns} ns")
        where = "memory only (no CPUs)" if n.memory_only else format_cpulist(n.cpus)
        out.append(f"  node {n.id:<3} {n.memory_bytes / GIB:8.1f} GiB  {where}  "
                   f"[{', '.join(facts)}]")
    if len(t.distances) > 1:
        ids = [n.id for n in t.numa_nodes]
        out.append("  distance " + "".join(f"{i:>5}" for i in ids))
        for i, row in zip(ids, t.distances):
            out.append(f"  {i:>8} " + "".join(f"{d:>5}" for d in row))
    out.append(f"memory       {memory_summary(t)}")
    if t.l3_domains:
        sizes = sorted({len(d) for d in t.l3_domains})
        out.append(f"l3 groups    {len(t.l3_domains)} (CPUs sharing an L3: "
                   f"{'/'.join(map(str, sizes))})")
    return out


def memory_summary(t: Topology) -> str:
    """Weighted interleave and numa_balancing in one line."""
    wi = t.memory.weighted_interleave
    weights = ("weighted interleave: not in this kernel" if wi is None else
               "weighted interleave: weights " + " ".join(f"{n}:{w}" for n, w in wi.weights)
               + (" (kernel auto)" if wi.auto else "")
               + ("" if wi.writable else " (read-only for this user)"))
    return f"{weights}; numa_balancing {_balancing(t.memory.numa_balancing)}"


def _balancing(value: int | None) -> str:
    if value is None:
        return "unknown"
    return {0: "off", 1: "on (pages move during trials; as root, search --quiet-numa turns it "
                        "off for the search)",
            2: "in memory-tiering mode (hot pages move between tiers during trials)"}.get(
                value, f"{value} (on)")


def _gpu_lines(t: Topology) -> list[str]:
    if not t.gpus:
        return ["gpus         none"]
    kind = "NVLink between all pairs" if all_nvlink(t.gpu_links) else "PCIe/mixed links"
    cuda = "" if t.capabilities.cuda else "; this torch cannot use CUDA: no GPU trials"
    out = [f"gpus         {len(t.gpus)} ({kind}{cuda})"]
    for g in t.gpus:
        aff = format_cpulist(g.cpu_affinity) if g.cpu_affinity else "?"
        out.append(f"  gpu{g.index:<3} {g.name}, {g.memory_bytes / GIB:.0f} GiB, numa node "
                   f"{'?' if g.numa_node is None else g.numa_node}, cpus {aff}")
    if t.gpu_links:
        out.append("  links  " + "".join(f"{'GPU' + str(g.index):>6}" for g in t.gpus))
        for g, row in zip(t.gpus, t.gpu_links):
            out.append(f"  {'GPU' + str(g.index):<6} " + "".join(f"{c:>6}" for c in row))
    return out


def _capability_lines(t: Topology) -> list[str]:
    caps = t.capabilities
    out = ["allocators"] + _paths(caps.allocators, missing="not found")
    out.append("openmp")
    out += _paths(caps.omp_runtimes, missing="not found", none_as={"libgomp": "torch default"})
    out.append(f"backends     {', '.join(caps.backends) or 'none'}"
               + (f"; ccl: unavailable ({caps.ccl_problem})" if caps.ccl_problem else ""))
    out.append(f"torch        {caps.torch_version or 'not importable'}; ipex: "
               + (caps.ipex_version or caps.ipex_problem or "not installed")
               + f"; torchvision: {'yes' if caps.torchvision else 'no'}")
    numactl = ("works" if caps.numactl_membind else "cpu binding only (--membind blocked)"
               if caps.numactl else "not usable")
    out.append(f"binding      numactl {numactl}; taskset {'works' if caps.taskset else 'not usable'}")
    out.append(f"compiler     {caps.cxx_compiler or 'none'}; torch.compile: "
               + (f"not offered ({caps.compile_problem})" if caps.compile_problem
                  else "offered on CPUs"))
    if t.gpus:
        out.append("             torch.compile on GPUs: "
                   + (f"not offered ({caps.triton_problem})" if caps.triton_problem
                      else "offered (Triton)"))
    return out


def _paths(mapping: dict[str, str | None], *, missing: str,
           none_as: dict[str, str] | None = None) -> list[str]:
    none_as = none_as or {}
    return [f"  {name:<10} {path or none_as.get(name, missing)}" for name, path in mapping.items()]
