"""Show the machine as the tuner sees it: CPU topology from sysfs, what this process may use
(affinity, cgroup quota), ISA, GPUs and their links, allocators, OpenMP runtimes, backends,
IPEX/oneCCL, numactl/taskset and a C++ compiler, with a fix for every problem found.

  autotune probe                      the live machine, as a table
  autotune probe --json               the same as one JSON object (a stable contract)
  autotune probe --capture DIR        write the files the probe reads into DIR, and what this
                                      machine can do (capabilities.json: torch's CUDA and
                                      backends, libraries, tools), to plan for it from elsewhere
                                      with `autotune run --sysfs-root DIR ... --dry-run`
  autotune probe --sysfs-root DIR     replay a capture (or any tree laid out like /sys)
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from ..probe import capture, probe
from ..probe.gpu import all_nvlink
from ..probe.parse import format_cpulist
from ..probe.topology import Topology

GIB = 1024 ** 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object (keys documented in docs/how-it-works.md)")
    parser.add_argument("--sysfs-root", metavar="DIR",
                        help="read a captured tree laid out like /sys instead of this machine "
                             "(devices/system/cpu/..., devices/system/node/..., plus cpuinfo, "
                             "affinity, cpu.max and nvidia-smi files at its root)")
    parser.add_argument("--capture", metavar="DIR",
                        help="write every file the probe reads, and this machine's capabilities "
                             "(capabilities.json), into DIR for later --sysfs-root")


def run(args: argparse.Namespace) -> int:
    if args.capture:
        written = capture(args.capture, sysfs_root=args.sysfs_root)
        # With --json, stdout carries nothing but the JSON object.
        print(f"captured {len(written)} files into {os.path.abspath(args.capture)}; "
              f"replay with: autotune probe --sysfs-root {args.capture}",
              file=sys.stderr if args.json else sys.stdout)
    topo = probe(args.sysfs_root)
    if args.json:
        print(json.dumps(topo.to_json()))
    else:
        print(render(topo, source=args.sysfs_root))
    return 0


def render(t: Topology, *, source: str | None = None) -> str:
    """The compact human table."""
    caps = t.capabilities
    out = [f"machine      {source or 'this machine'} (fingerprint {t.fingerprint()})",
           f"cpu          {t.isa.describe()}; "
           f"isa: {' '.join(t.isa.flags) or 'none of interest'}",
           f"sockets      {t.sockets}"]
    usable = t.usable_cores()
    quota = f", cgroup quota {t.cpu_quota:g} CPUs" if t.cpu_quota is not None else ""
    out.append(f"cpus         {len(t.cores)} physical cores, {len(t.logical_cpus)} logical CPUs "
               f"online; usable: {len(usable)} cores / {len(t.usable_cpus)} CPUs "
               f"({format_cpulist(t.usable_cpus)}){quota} -> plans use {t.num_usable_cores()} "
               "cores")
    smt = next((c for c in t.cores if len(c.cpus) > 1), None)
    out.append(f"smt          siblings e.g. {'/'.join(map(str, smt.cpus))} (up to "
               f"{max(len(c.cpus) for c in t.cores)} threads per core)" if smt else
               "smt          off (1 thread per core)")
    out += _numa_lines(t)
    if t.l3_domains:
        sizes = sorted({len(d) for d in t.l3_domains})
        out.append(f"l3 groups    {len(t.l3_domains)} (CPUs sharing an L3: "
                   f"{'/'.join(map(str, sizes))})")
    if t.gpus:
        kind = "NVLink between all pairs" if all_nvlink(t.gpu_links) else "PCIe/mixed links"
        cuda = "" if caps.cuda else "; this torch cannot use CUDA: no GPU trials"
        out.append(f"gpus         {len(t.gpus)} ({kind}{cuda})")
        for g in t.gpus:
            aff = format_cpulist(g.cpu_affinity) if g.cpu_affinity else "?"
            out.append(f"  gpu{g.index:<3} {g.name}, {g.memory_bytes / GIB:.0f} GiB, numa node "
                       f"{'?' if g.numa_node is None else g.numa_node}, cpus {aff}")
        if t.gpu_links:
            out.append("  links  " + "".join(f"{'GPU' + str(g.index):>6}" for g in t.gpus))
            for g, row in zip(t.gpus, t.gpu_links):
                out.append(f"  {'GPU' + str(g.index):<6} " + "".join(f"{c:>6}" for c in row))
    else:
        out.append("gpus         none")
    out.append("allocators")
    out += _paths(caps.allocators, missing="not found")
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
    out.append(f"compiler     {caps.cxx_compiler or 'none (torch.compile unavailable)'}")
    if t.warnings:
        out.append("warnings")
        out += [f"  - {w}" for w in t.warnings]
    return "\n".join(out)


def _numa_lines(t: Topology) -> list[str]:
    """Each node: its size, free memory, kind and CPUs; the distances; then where memory may be
    placed (weighted interleave) and whether the kernel moves pages (numa_balancing)."""
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
    return out + [f"memory       {memory_summary(t)}"]


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


def _paths(mapping: dict[str, str | None], *, missing: str,
           none_as: dict[str, str] | None = None) -> list[str]:
    none_as = none_as or {}
    return [f"  {name:<10} {path or none_as.get(name, missing)}" for name, path in mapping.items()]
