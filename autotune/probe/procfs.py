"""Parsers of /proc text (maps, status, numa_maps): pure, torch-free, tested on literal text.

Shared by the in-rank checks (worker/in_force.py reads /proc/self) and the outside-the-process observer
(measure/observe.py reads /proc/PID of a user's script).
"""
from __future__ import annotations

from collections.abc import Sequence

# Library name fragments that decide the allocator and the OpenMP runtime in force.
_LIB_KEYS = ("libjemalloc", "libtcmalloc", "libiomp5", "libgomp", "libomp.")


def read_proc(path: str) -> str:
    """A /proc file's text; empty when it is gone (the process ended) or not ours to read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def classify_libraries(libraries: Sequence[str]) -> tuple[str, str]:
    """(allocator, omp_runtime) from mapped library basenames.

    The torch wheel always maps its own libgomp; a preloaded libiomp5 wins symbol resolution, so
    libiomp5 mapped at all means libiomp5 is the runtime in force.
    """
    alloc = [a for a in ("jemalloc", "tcmalloc") if any(f"lib{a}" in lib for lib in libraries)]
    if any("libiomp5" in lib for lib in libraries):
        omp = "libiomp5"
    elif any("libgomp" in lib for lib in libraries):
        omp = "libgomp"
    else:
        omp = "none"
    return ("+".join(alloc) if alloc else "default"), omp


def mapped_libraries(maps_text: str) -> tuple[str, ...]:
    """Basenames of the allocator and OpenMP libraries in /proc/PID/maps text, sorted."""
    libs = {line.split()[-1].rsplit("/", 1)[-1] for line in maps_text.splitlines()
            if len(line.split()) >= 6}
    return tuple(sorted(lib for lib in libs if any(k in lib for k in _LIB_KEYS)))


def parse_maps(text: str) -> tuple[str, str]:
    """(allocator, omp_runtime) from /proc/PID/maps text."""
    return classify_libraries(mapped_libraries(text))


def parse_mems_allowed(status_text: str) -> str | None:
    for line in status_text.splitlines():
        if line.startswith("Mems_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return None


def parse_mem_policy(numa_maps_text: str) -> str | None:
    """The task's NUMA memory policy ("default", "bind:1", ...) from /proc/PID/numa_maps.

    `numactl --membind` sets a memory *policy*; it leaves Mems_allowed_list (the cpuset) alone, so
    only the policy shows whether memory binding took effect. numa_maps prints the task policy for
    mappings without their own, the first line (the executable) among them.
    """
    first = numa_maps_text.split("\n", 1)[0].split()
    if len(first) < 2:
        return None
    # two-word modes: "prefer (many):0-1", "weighted interleave:0,2" (mm/mempolicy.c)
    if len(first) > 2 and (first[2].startswith("(many)") or first[1] == "weighted"):
        return f"{first[1]} {first[2]}"
    return first[1]


# numa_maps' name of each memory mode a plan names (plan/memory.py, bind.mem_flags)
_NUMA_MAPS_MODES = {"interleave": "interleave", "preferred": "prefer",
                    "weighted": "weighted interleave", "bind": "bind"}


def memory_placed(spec: str, policy: str | None) -> bool:
    """The task policy read from numa_maps (`policy`, e.g. "interleave:0,4" or
    "interleave=static:0,4") is the plan's ("interleave:0,4"): same mode, same nodes."""
    if not policy or ":" not in policy:
        return False
    from .parse import parse_cpulist
    mode, _, nodes = spec.partition(":")
    got_mode, _, got_nodes = policy.rpartition(":")
    try:
        return (got_mode.split("=")[0] == _NUMA_MAPS_MODES.get(mode)
                and parse_cpulist(got_nodes) == parse_cpulist(nodes))
    except Exception:   # a policy text this parser does not know: not the plan's
        return False


def memory_bound_to(node: int, policy: str | None, mems_allowed: str | None) -> bool:
    """Memory of this process can only come from `node`: a bind/prefer policy naming exactly it,
    or, with the default policy, a cpuset that allows only it (containers; 1-node machines)."""
    if policy and policy.split(":")[0].split("=")[0] in ("bind", "prefer", "prefer (many)"):
        return policy.rsplit(":", 1)[-1] == str(node)
    return mems_allowed == str(node)
