"""The machine as the tuner sees it: frozen values produced by the probe's parsers.

Everything downstream (spaces, plans, exports) is computed from a `Topology`, never from the live
machine, so a captured machine can be replayed and planned against anywhere.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .memory import Memory

SCHEMA_VERSION = 1

# ISA flags that change what the tuner may offer (bf16/fp16 math, AMX tiles) or which kernels
# oneDNN and torch's CPU dispatch pick (AVX-512 subsets, VNNI), so results measured with one set
# do not carry over to another.
INTERESTING_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx_vnni",
                     "avx_vnni_int8", "avx_ne_convert", "avx512_bf16", "avx512_fp16", "amx_bf16",
                     "amx_fp16", "amx_tile", "amx_int8", "amx_complex")


def memory_class_gib(memory_bytes: int) -> int:
    """A node's memory to the nearest power of two GiB (0 for none): 64 vs 128 vs 256 GiB are
    different machines, but a node's MemTotal is not a constant. Kernels reserve different amounts,
    and VMs add memory while running: the Firecracker VM this project runs on reported node 0 at
    5.7 GiB, then 9.1 GiB twenty minutes later. Exact or whole-GiB values would make the same
    machine a stranger to its own studies."""
    gib = memory_bytes / 2**30
    return 0 if gib < 0.5 else 2 ** round(math.log2(gib))


@dataclass(frozen=True, kw_only=True)
class NumaNode:
    id: int
    cpus: tuple[int, ...]  # empty for memory-only nodes (HBM in flat mode, CXL expanders)
    memory_bytes: int

    @property
    def memory_only(self) -> bool:
        return not self.cpus


@dataclass(frozen=True, kw_only=True)
class Core:
    """One physical core: its logical CPUs are the SMT siblings from thread_siblings_list."""
    socket: int
    node: int | None
    cpus: tuple[int, ...]  # sorted; cpus[0] is the core's "primary" thread


@dataclass(frozen=True, kw_only=True)
class Isa:
    vendor: str = "unknown"
    model_name: str = "unknown"
    flags: tuple[str, ...] = ()  # the subset of INTERESTING_FLAGS present, sorted
    # CPUID family/model/stepping (ARM: implementer/part/revision). Two generations can share a
    # model name ("AMD EPYC" in a VM is both Zen 4, family 25, and Zen 5, family 26).
    family: int | None = None
    model: int | None = None
    stepping: int | None = None

    def describe(self) -> str:
        """'AMD EPYC (amd family 26 model 2 stepping 1)': how results name their machine."""
        ids = " ".join(f"{k} {v}" for k, v in (("family", self.family), ("model", self.model),
                                                ("stepping", self.stepping)) if v is not None)
        return f"{self.model_name} ({self.vendor}{' ' + ids if ids else ''})"

    @property
    def bf16(self) -> bool:
        return "avx512_bf16" in self.flags or "amx_bf16" in self.flags

    @property
    def fp16(self) -> bool:
        return "avx512_fp16" in self.flags or "amx_fp16" in self.flags


@dataclass(frozen=True, kw_only=True)
class Gpu:
    index: int
    name: str
    memory_bytes: int
    numa_node: int | None = None
    cpu_affinity: tuple[int, ...] = ()   # "CPU Affinity" of nvidia-smi topo -m; () = unknown


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What can be used on this machine: libraries found, tools that work."""
    allocators: dict[str, str | None] = field(default_factory=dict)    # name -> library path or None
    omp_runtimes: dict[str, str | None] = field(default_factory=dict)  # "libgomp"/"libiomp5" -> path
    backends: tuple[str, ...] = ("gloo",)
    torch_version: str | None = None
    ipex_version: str | None = None      # set only when IPEX imports and matches torch
    ipex_problem: str | None = None      # why IPEX is installed but unusable
    ccl_problem: str | None = None       # why the ccl backend is not offered
    numactl: bool = False                # present AND a no-op run succeeded
    numactl_membind: bool = False        # --membind works (often blocked in containers)
    numactl_weighted: bool = False       # --weighted-interleave works (numactl 2.0.19+)
    taskset: bool = False
    cxx_compiler: str | None = None
    # Why torch.compile cannot run here, one line with its fix (None: it can): on the CPUs, a
    # C++ compiler that builds what inductor builds; on the GPUs, Triton (probe/capabilities.py)
    compile_problem: str | None = None
    triton_problem: str | None = None
    torchvision: bool = False
    cuda: bool = False                   # torch can use the GPUs found (a CUDA build, a driver)


@dataclass(frozen=True, kw_only=True)
class TorchBuild:
    """The torch installation trials run with: another version or build gives other kernels and
    other timings, so it is part of what a study was measured on."""
    version: str = "unknown"
    git_version: str | None = None
    accelerator: str | None = None       # "cuda 12.4", "hip 6.1", "xpu ..."; None = CPU-only build
    debug: bool = False

    def tag(self) -> str:
        """Short and readable, for study names: 'torch2.13.0+cpu.cf30153'."""
        return f"torch{self.version}" + (f".{self.git_version[:7]}" if self.git_version else "")

    def describe(self) -> str:
        extra = [f"git {self.git_version[:7]}" if self.git_version else "",
                 self.accelerator or "", "debug build" if self.debug else ""]
        extra = [e for e in extra if e]
        return f"torch {self.version}" + (f" ({', '.join(extra)})" if extra else "")

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "git_version": self.git_version,
                "accelerator": self.accelerator, "debug": self.debug}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "TorchBuild":
        return cls(version=str(d.get("version") or "unknown"), git_version=d.get("git_version"),
                   accelerator=d.get("accelerator"), debug=bool(d.get("debug", False)))


@dataclass(frozen=True, kw_only=True)
class Topology:
    sockets: int
    logical_cpus: tuple[int, ...]          # online CPUs
    cores: tuple[Core, ...]                # physical cores over all online CPUs
    numa_nodes: tuple[NumaNode, ...]
    distances: tuple[tuple[int, ...], ...] = ()   # node distance matrix, in numa_nodes order
    usable_cpus: tuple[int, ...] = ()       # sched_getaffinity restricted to online CPUs
    cpu_quota: float | None = None          # cgroup cpu.max quota/period in CPUs, None = unlimited
    isa: Isa = field(default_factory=Isa)
    gpus: tuple[Gpu, ...] = ()
    gpu_links: tuple[tuple[str, ...], ...] = ()   # nvidia-smi topo -m matrix: "X", "NV12", "PIX", ...
    # CPUs sharing one L3 cache (a "core complex" on AMD), sorted; () when sysfs has no L3 info
    l3_domains: tuple[tuple[int, ...], ...] = ()
    capabilities: Capabilities = field(default_factory=Capabilities)
    warnings: tuple[str, ...] = ()
    # each node's kind (DRAM, HBM, CXL), free memory and speed; the kernel's weighted-interleave
    # weights and numa_balancing (probe/memory.py). Not in the fingerprint: free memory moves,
    # and the rest follows from the nodes, their sizes and the CPU, which are.
    memory: Memory = field(default_factory=Memory)

    # ---- derived views used by planners -------------------------------------------------------
    def usable_cores(self) -> tuple[Core, ...]:
        """Physical cores with at least one usable CPU, each trimmed to its usable CPUs."""
        return self._usable_cores

    @cached_property
    def _usable_cores(self) -> tuple[Core, ...]:
        # computed once: the topology is frozen, and planning asks for it for every configuration
        usable = set(self.usable_cpus or self.logical_cpus)
        out = []
        for core in self.cores:
            cpus = tuple(c for c in core.cpus if c in usable)
            if cpus:
                out.append(Core(socket=core.socket, node=core.node, cpus=cpus))
        return tuple(out)

    def compute_nodes(self) -> tuple[NumaNode, ...]:
        """NUMA nodes that have usable CPUs; memory-only nodes are never planned on."""
        nodes_with_cores = {c.node for c in self.usable_cores()}
        return tuple(n for n in self.numa_nodes if n.cpus and n.id in nodes_with_cores)

    def num_usable_cores(self) -> int:
        """Physical cores available for compute, capped by the cgroup CPU quota."""
        n = len(self.usable_cores())
        if self.cpu_quota is not None:
            n = max(1, min(n, int(self.cpu_quota)))
        return n

    def fingerprint(self) -> str:
        """Stable id of the hardware (not of the libraries): same machine -> same id, and anything
        that changes a measurement (CPU generation, ISA, memory) -> another id."""
        return hashlib.sha256(json.dumps(self.hardware(), sort_keys=True).encode()).hexdigest()[:12]

    def hardware(self) -> dict[str, Any]:
        """What the fingerprint hashes, readable: stored with a study to say why it differs."""
        return {
            "sockets": self.sockets,
            "cores": [list(c.cpus) for c in self.cores],
            "nodes": [[n.id, list(n.cpus)] for n in self.numa_nodes],
            "node_memory_gib": [memory_class_gib(n.memory_bytes) for n in self.numa_nodes],
            "usable": list(self.usable_cpus),
            "cpu": [self.isa.vendor, self.isa.model_name, self.isa.family, self.isa.model,
                    self.isa.stepping],
            "flags": list(self.isa.flags),
            "gpus": [g.name for g in self.gpus],
        }

    def to_json(self) -> dict[str, Any]:
        """The stable `autotune probe --json` contract (documented in docs/how-it-works.md)."""
        caps = self.capabilities
        return {
            "schema_version": SCHEMA_VERSION,
            "fingerprint": self.fingerprint(),
            "sockets": self.sockets,
            "logical_cpus": len(self.logical_cpus),
            "physical_cores": len(self.cores),
            "usable_cpus": list(self.usable_cpus),
            "usable_physical_cores": self.num_usable_cores(),
            "cpu_quota": self.cpu_quota,
            "numa_nodes": [{"id": n.id, "cpus": list(n.cpus), "memory_bytes": n.memory_bytes}
                           for n in self.numa_nodes],
            "numa_distances": [list(r) for r in self.distances],
            "cores": [list(c.cpus) for c in self.cores],
            "core_sockets": [c.socket for c in self.cores],
            "isa": {"vendor": self.isa.vendor, "model_name": self.isa.model_name,
                    "family": self.isa.family, "model": self.isa.model,
                    "stepping": self.isa.stepping,
                    "flags": list(self.isa.flags), "bf16": self.isa.bf16, "fp16": self.isa.fp16},
            "gpus": [{"index": g.index, "name": g.name, "memory_bytes": g.memory_bytes,
                      "numa_node": g.numa_node, "cpu_affinity": list(g.cpu_affinity)}
                     for g in self.gpus],
            "gpu_links": [list(r) for r in self.gpu_links],
            "l3_domains": [list(d) for d in self.l3_domains],
            "allocators": dict(caps.allocators),
            "omp_runtimes": dict(caps.omp_runtimes),
            "backends": list(caps.backends),
            "torch_version": caps.torch_version,
            "ipex": {"version": caps.ipex_version, "problem": caps.ipex_problem},
            "ccl_problem": caps.ccl_problem,
            "numactl": caps.numactl,
            "numactl_membind": caps.numactl_membind,
            "numactl_weighted": caps.numactl_weighted,
            "taskset": caps.taskset,
            "cxx_compiler": caps.cxx_compiler,
            "compile_problem": caps.compile_problem,
            "triton_problem": caps.triton_problem,
            "torchvision": caps.torchvision,
            "cuda": caps.cuda,
            "warnings": list(self.warnings),
            "memory": self.memory.to_json(),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Topology":
        """Inverse of to_json (used to store a topology with a study and to replay it)."""
        core_of = {}
        for node in d["numa_nodes"]:
            for cpu in node["cpus"]:
                core_of[cpu] = node["id"]
        cores = tuple(Core(socket=0, node=core_of.get(c[0]), cpus=tuple(c)) for c in d["cores"])
        sockets_hint = d.get("core_sockets")
        if sockets_hint:
            cores = tuple(Core(socket=s, node=c.node, cpus=c.cpus) for s, c in zip(sockets_hint, cores))
        ipex = d.get("ipex") or {}
        caps = Capabilities(
            allocators=dict(d.get("allocators", {})), omp_runtimes=dict(d.get("omp_runtimes", {})),
            backends=tuple(d.get("backends", ("gloo",))), torch_version=d.get("torch_version"),
            ipex_version=ipex.get("version"), ipex_problem=ipex.get("problem"),
            ccl_problem=d.get("ccl_problem"), numactl=d.get("numactl", False),
            numactl_membind=d.get("numactl_membind", False), taskset=d.get("taskset", False),
            numactl_weighted=d.get("numactl_weighted", False),
            cxx_compiler=d.get("cxx_compiler"), torchvision=d.get("torchvision", False),
            compile_problem=d.get("compile_problem"),
            # a GPU machine stored before the Triton check: not known to compile
            triton_problem=d.get("triton_problem", "not checked (probed before autotune checked "
                                                   "Triton)" if d.get("gpus") else None),
            cuda=d.get("cuda", False))
        isa = d.get("isa", {})
        return cls(
            sockets=d["sockets"],
            logical_cpus=tuple(sorted(c for core in d["cores"] for c in core)),
            cores=cores,
            numa_nodes=tuple(NumaNode(id=n["id"], cpus=tuple(n["cpus"]), memory_bytes=n["memory_bytes"])
                             for n in d["numa_nodes"]),
            distances=tuple(tuple(r) for r in d.get("numa_distances", [])),
            usable_cpus=tuple(d["usable_cpus"]), cpu_quota=d.get("cpu_quota"),
            isa=Isa(vendor=isa.get("vendor", "unknown"), model_name=isa.get("model_name", "unknown"),
                    flags=tuple(isa.get("flags", ())), family=isa.get("family"),
                    model=isa.get("model"), stepping=isa.get("stepping")),
            gpus=tuple(Gpu(index=g["index"], name=g["name"], memory_bytes=g["memory_bytes"],
                           numa_node=g.get("numa_node"),
                           cpu_affinity=tuple(g.get("cpu_affinity", ())))
                      for g in d.get("gpus", [])),
            gpu_links=tuple(tuple(r) for r in d.get("gpu_links", [])),
            l3_domains=tuple(tuple(c) for c in d.get("l3_domains", [])),
            capabilities=caps, warnings=tuple(d.get("warnings", ())),
            memory=Memory.from_json(d.get("memory")))
