"""Pure parsers for nvidia-smi output: the GPU list and the `nvidia-smi topo -m` link matrix.

Input is what the tools print:
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits
      0, NVIDIA H100 80GB HBM3, 81559
  nvidia-smi topo -m
      a tab-separated matrix (header row GPU0 GPU1 ... [NIC0 ...] CPU Affinity NUMA Affinity
      [GPU NUMA ID]), cells padded with spaces (" X "), sometimes with ANSI underline codes in the
      header, then a "Legend:" block.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ProbeError
from .topology import Gpu
from .parse import parse_cpulist

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU_LABEL = re.compile(r"^GPU(\d+)$")
MIB = 1024 * 1024

# What each link code of `nvidia-smi topo -m` means, fastest first (NVIDIA's legend).
LINK_KINDS = {
    "X": "self",
    "NV": "NVLink (bonded set of # links)",
    "PIX": "PCIe, at most one bridge",
    "PXB": "PCIe, several bridges, no host bridge",
    "PHB": "PCIe through a host bridge (the CPU)",
    "NODE": "PCIe and the host-bridge interconnect within a NUMA node",
    "SYS": "PCIe and the inter-socket link (QPI/UPI/Infinity Fabric)",
}


@dataclass(frozen=True)
class TopoMatrix:
    """The GPU part of `nvidia-smi topo -m`: link codes and each GPU's CPU/NUMA affinity."""
    gpus: tuple[int, ...]
    links: tuple[tuple[str, ...], ...]
    cpu_affinity: dict[int, tuple[int, ...]]
    numa_affinity: dict[int, int | None]


def parse_query(text: str, *, where: str = "nvidia-smi --query-gpu") -> tuple[Gpu, ...]:
    """GPUs from `--query-gpu=index,name,memory.total --format=csv,noheader,nounits`.

    Tolerates a header line and a " MiB" unit (captures made without noheader/nounits); memory
    reported as "[N/A]" (some vGPU/MIG setups) becomes 0.
    """
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        index, sep, rest = line.partition(",")
        if not index.strip().isdigit():
            if index.strip().lower() == "index":
                continue  # header
            raise ProbeError(f"{where}: cannot parse GPU line {line.strip()[:80]!r}")
        name, sep2, mem = rest.rpartition(",")
        if not sep or not sep2:
            raise ProbeError(f"{where}: expected 'index, name, memory.total', got {line.strip()!r}")
        m = re.fullmatch(r"\s*(\d+)\s*(MiB)?\s*", mem)
        gpus.append(Gpu(index=int(index), name=name.strip(),
                        memory_bytes=int(m.group(1)) * MIB if m else 0))
    return tuple(sorted(gpus, key=lambda g: g.index))


def parse_topo(text: str, *, where: str = "nvidia-smi topo -m") -> TopoMatrix:
    """The GPU rows of `nvidia-smi topo -m`. NIC rows and the legend are skipped."""
    lines = [_ANSI.sub("", line).rstrip("\n") for line in text.splitlines()]
    # The header row starts with an empty cell (the row-label column); GPU rows start "GPUn".
    header_at = next((i for i, line in enumerate(lines)
                      if (cells := [c.strip() for c in line.split("\t")])[0] == ""
                      and "GPU0" in cells), None)
    if header_at is None:
        raise ProbeError(f"{where}: no header row with GPU0")
    header = [c.strip() for c in lines[header_at].split("\t")]
    if header and header[0] == "":
        header = header[1:]
    devices = [h for h in header if h and h not in ("CPU Affinity", "NUMA Affinity",
                                                     "GPU NUMA ID")]
    n_dev = len(devices)
    trailing = [h for h in header[n_dev:] if h]
    gpu_cols = [i for i, h in enumerate(devices) if _GPU_LABEL.match(h)]
    gpus, links, cpu_aff, numa_aff = [], [], {}, {}
    for line in lines[header_at + 1:]:
        if line.strip().startswith("Legend"):
            break
        cells = line.split("\t")
        m = _GPU_LABEL.match(cells[0].strip())
        if not m:
            continue  # NIC rows, blank lines
        values = [c.strip() for c in cells[1:]]
        if len(values) < n_dev:
            raise ProbeError(f"{where}: row {cells[0].strip()} has {len(values)} cells, "
                             f"expected at least {n_dev}")
        idx = int(m.group(1))
        gpus.append(idx)
        links.append(tuple(values[i] for i in gpu_cols))
        # Trailing columns are separated by a variable number of tabs: match them in order.
        extra = dict(zip(trailing, [v for v in values[n_dev:] if v]))
        aff = extra.get("CPU Affinity", "N/A")
        cpu_aff[idx] = () if aff in ("N/A", "") else parse_cpulist(aff, where=f"{where} GPU{idx}")
        numa = extra.get("NUMA Affinity", "N/A")
        numa_aff[idx] = int(numa) if numa.isdigit() else None
    if not gpus:
        raise ProbeError(f"{where}: no GPU rows under the header")
    for row in links:
        for code in row:
            if link_kind(code) is None:
                raise ProbeError(f"{where}: unknown link code {code!r}")
    return TopoMatrix(gpus=tuple(gpus), links=tuple(links), cpu_affinity=cpu_aff,
                      numa_affinity=numa_aff)


def link_kind(code: str) -> str | None:
    """"NV18" -> "nvlink", "PIX"/"PXB"/"PHB"/"NODE"/"SYS" -> "pcie", "X" -> "self", else None."""
    if code == "X":
        return "self"
    if re.fullmatch(r"NV\d+", code):
        return "nvlink"
    if code in ("PIX", "PXB", "PHB", "NODE", "SYS"):
        return "pcie"
    return None


def all_nvlink(links: tuple[tuple[str, ...], ...]) -> bool:
    """Every GPU pair is joined by NVLink (an NVLink/NVSwitch box); False for 0 or 1 GPU."""
    pairs = [code for i, row in enumerate(links) for j, code in enumerate(row) if i != j]
    return bool(pairs) and all(link_kind(c) == "nvlink" for c in pairs)


def merge(gpus: tuple[Gpu, ...], topo: TopoMatrix | None,
          node_cpus: dict[int, tuple[int, ...]] | None = None
          ) -> tuple[tuple[Gpu, ...], tuple[tuple[str, ...], ...]]:
    """GPUs with their NUMA node and CPU affinity from the topo matrix, and the link matrix.

    Older nvidia-smi has no "NUMA Affinity" column (and prints N/A on some VMs): the node is then
    the one whose CPUs hold the GPU's CPU affinity, when exactly one does.
    """
    if topo is None:
        return gpus, ()
    out = []
    for g in gpus:
        aff = topo.cpu_affinity.get(g.index, ())
        node = topo.numa_affinity.get(g.index)
        if node is None and aff and node_cpus:
            holders = [nid for nid, cpus in node_cpus.items() if cpus and set(aff) <= set(cpus)]
            node = holders[0] if len(holders) == 1 else None
        out.append(Gpu(index=g.index, name=g.name, memory_bytes=g.memory_bytes, numa_node=node,
                       cpu_affinity=aff))
    return tuple(out), topo.links
