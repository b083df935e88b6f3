"""What a rank actually has in force (affinity, threads, allocator, OpenMP, memory node, autocast),
and how it differs from what the plan promised.

Collect, then parse: `collect()` reads /proc and torch; `parse_*` and `differences` are pure and are
tested on literal text. A knob that silently does nothing (an LD_PRELOAD path that does not exist,
OMP_NUM_THREADS overridden by a library, a numactl that was not applied) would make the search
compare identical configurations, so every difference fails the trial as bad_config.
"""
from __future__ import annotations

import os
from typing import Any

import torch

from .plan_types import RankExpect

_AUTOCAST_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16"}


def parse_maps(text: str) -> tuple[str, str]:
    """(allocator, omp_runtime) from /proc/self/maps text.

    The torch wheel always maps its own libgomp; a preloaded libiomp5 wins symbol resolution, so
    libiomp5 mapped at all means libiomp5 is the runtime in force.
    """
    libs = {line.split()[-1].rsplit("/", 1)[-1] for line in text.splitlines()
            if len(line.split()) >= 6}
    alloc = [a for a in ("jemalloc", "tcmalloc") if any(f"lib{a}" in lib for lib in libs)]
    allocator = "+".join(alloc) if alloc else "default"
    if any("libiomp5" in lib for lib in libs):
        omp = "libiomp5"
    elif any("libgomp" in lib for lib in libs):
        omp = "libgomp"
    else:
        omp = "none"
    return allocator, omp


def parse_mems_allowed(status_text: str) -> str | None:
    for line in status_text.splitlines():
        if line.startswith("Mems_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return None


def parse_mem_policy(numa_maps_text: str) -> str | None:
    """The task's NUMA memory policy ("default", "bind:1", ...) from /proc/self/numa_maps.

    `numactl --membind` sets a memory *policy*; it leaves Mems_allowed_list (the cpuset) alone, so
    only the policy shows whether memory binding took effect. numa_maps prints the task policy for
    mappings without their own, the first line (the executable) among them.
    """
    first = numa_maps_text.split("\n", 1)[0].split()
    if len(first) < 2:
        return None
    if len(first) > 2 and first[2].startswith("(many)"):   # "prefer (many):0-1"
        return f"{first[1]} {first[2]}"
    return first[1]


def memory_bound_to(node: int, policy: str | None, mems_allowed: str | None) -> bool:
    """Memory of this process can only come from `node`: a bind/prefer policy naming exactly it,
    or, with the default policy, a cpuset that allows only it (containers; 1-node machines)."""
    if policy and policy.split(":")[0].split("=")[0] in ("bind", "prefer", "prefer (many)"):
        return policy.rsplit(":", 1)[-1] == str(node)
    return mems_allowed == str(node)


def autocast_name(enabled: bool, dtype: torch.dtype) -> str:
    return _AUTOCAST_NAMES.get(dtype, str(dtype)) if enabled else "fp32"


def current_autocast(device_type: str = "cpu") -> str:
    """The autocast precision in force right here (call it inside the training step's context)
    for the rank's device type: a CPU autocast does nothing to CUDA kernels and vice versa."""
    return autocast_name(torch.is_autocast_enabled(device_type),
                         torch.get_autocast_dtype(device_type))


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def collect(autocast_dtype: str) -> dict[str, Any]:
    allocator, omp = parse_maps(_read("/proc/self/maps"))
    return {
        "affinity": sorted(os.sched_getaffinity(0)),
        "num_threads": torch.get_num_threads(),
        "allocator": allocator,
        "omp_runtime": omp,
        "mems_allowed": parse_mems_allowed(_read("/proc/self/status")),
        "mem_policy": parse_mem_policy(_read("/proc/self/numa_maps")),
        "autocast_dtype": autocast_dtype,
    }


def _cpus_text(cpus: list[int] | tuple[int, ...]) -> str:
    from .plan_types import cpulist
    return cpulist(tuple(cpus))


def differences(expect: RankExpect, in_force: dict[str, Any]) -> list[str]:
    """Every planned-vs-in-force difference as 'knob: planned X, in force Y'."""
    diffs: list[str] = []
    if expect.cpus is not None and sorted(expect.cpus) != sorted(in_force["affinity"]):
        diffs.append(f"affinity: planned {_cpus_text(expect.cpus)}, "
                     f"in force {_cpus_text(in_force['affinity'])}")
    if expect.threads is not None and expect.threads != in_force["num_threads"]:
        diffs.append(f"threads: planned {expect.threads}, in force {in_force['num_threads']}")
    # None: not part of the plan (a standalone rank whose launcher chose the libraries).
    if expect.allocator is not None and expect.allocator != in_force["allocator"]:
        diffs.append(f"allocator: planned {expect.allocator}, in force {in_force['allocator']}")
    if expect.omp_runtime is not None and expect.omp_runtime != in_force["omp_runtime"]:
        diffs.append(f"omp_runtime: planned {expect.omp_runtime}, "
                     f"in force {in_force['omp_runtime']}")
    if expect.mem_node is not None and not memory_bound_to(
            expect.mem_node, in_force.get("mem_policy"), in_force["mems_allowed"]):
        diffs.append(f"mem_node: planned {expect.mem_node}, in force policy "
                     f"{in_force.get('mem_policy')}, mems_allowed {in_force['mems_allowed']}")
    # None: not planned (older requests). A GPU rank on the wrong GPU shares it with a peer.
    if expect.device is not None and expect.device != in_force.get("device", "cpu"):
        diffs.append(f"device: planned {expect.device}, in force {in_force.get('device')}")
    if expect.backend is not None and expect.backend != in_force.get("backend"):
        diffs.append(f"backend: planned {expect.backend}, in force {in_force.get('backend')}")
    if expect.precision != in_force["autocast_dtype"]:
        diffs.append(f"precision: planned {expect.precision}, "
                     f"in force {in_force['autocast_dtype']}")
    return diffs
