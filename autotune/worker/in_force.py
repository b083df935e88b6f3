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

from ..plan.launch_plan import RankExpect
from ..probe.procfs import (memory_bound_to, memory_placed, parse_maps, parse_mem_policy,
                            parse_mems_allowed, read_proc)

# The /proc parsers live in probe/procfs.py (torch-free), shared with the outside-the-process checks.
__all__ = ["autocast_name", "collect", "current_autocast", "differences", "memory_bound_to",
           "parse_maps", "parse_mem_policy", "parse_mems_allowed"]

_AUTOCAST_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16"}


def autocast_name(enabled: bool, dtype: torch.dtype) -> str:
    return _AUTOCAST_NAMES.get(dtype, str(dtype)) if enabled else "fp32"


def current_autocast(device_type: str = "cpu") -> str:
    """The autocast precision in force right here (call it inside the training step's context)
    for the rank's device type: a CPU autocast does nothing to CUDA kernels and vice versa."""
    return autocast_name(torch.is_autocast_enabled(device_type),
                         torch.get_autocast_dtype(device_type))


def collect(autocast_dtype: str) -> dict[str, Any]:
    allocator, omp = parse_maps(read_proc("/proc/self/maps"))
    return {
        "affinity": sorted(os.sched_getaffinity(0)),
        "num_threads": torch.get_num_threads(),
        "allocator": allocator,
        "omp_runtime": omp,
        "mems_allowed": parse_mems_allowed(read_proc("/proc/self/status")),
        "mem_policy": parse_mem_policy(read_proc("/proc/self/numa_maps")),
        "autocast_dtype": autocast_dtype,
    }


def _cpus_text(cpus: list[int] | tuple[int, ...]) -> str:
    from ..probe.parse import format_cpulist
    return format_cpulist(tuple(cpus))


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
    # numactl --interleave/--preferred/--weighted-interleave set the task's policy: numa_maps
    # shows it, or the policy was not applied and the trial would measure local memory
    if expect.mem_policy is not None and not memory_placed(expect.mem_policy,
                                                           in_force.get("mem_policy")):
        diffs.append(f"mem_policy: planned {expect.mem_policy}, in force policy "
                     f"{in_force.get('mem_policy')}")
    # None: not planned (older requests). A GPU rank on the wrong GPU shares it with a peer.
    if expect.device is not None and expect.device != in_force.get("device", "cpu"):
        diffs.append(f"device: planned {expect.device}, in force {in_force.get('device')}")
    if expect.backend is not None and expect.backend != in_force.get("backend"):
        diffs.append(f"backend: planned {expect.backend}, in force {in_force.get('backend')}")
    if expect.precision != in_force["autocast_dtype"]:
        diffs.append(f"precision: planned {expect.precision}, "
                     f"in force {in_force['autocast_dtype']}")
    return diffs
