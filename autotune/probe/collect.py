"""Collectors: the only probe code that touches the machine. They return raw text, never values.

`collect_machine(root)` returns every file the parsers need as {relative path: text}. Sysfs files
keep their path under the root ("devices/system/cpu/online"); what does not live in sysfs is
stored under a well-known name at the root (CPUINFO, AFFINITY, ...), so writing the mapping to a
directory *is* a capture and `--sysfs-root` replays it with the same code path.
The raw facts about libraries and tools are gathered in collect_capabilities.py.
"""
from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from ..errors import ProbeError
from ..util.search_path import child_env
from .parse import format_cpulist

LIVE_SYSFS = "/sys"
# Files at the root of a capture that do not come from sysfs (the replay contract).
CPUINFO = "cpuinfo"                      # copy of /proc/cpuinfo
AFFINITY = "affinity"                    # cpulist of os.sched_getaffinity(0)
CPU_MAX = "cpu.max"                      # "QUOTA PERIOD" per cgroup level (v1 pairs converted)
MEMINFO = "meminfo"                      # /proc/meminfo, only when the kernel has no NUMA nodes
GPU_QUERY = "nvidia-smi-query-gpu.csv"   # nvidia-smi --query-gpu=index,name,memory.total ...
GPU_TOPO = "nvidia-smi-topo-m.txt"       # nvidia-smi topo -m
GPU_ERROR = "nvidia-smi-error.txt"       # why nvidia-smi is present but failed
NUMA_BALANCING = "numa_balancing"        # copy of /proc/sys/kernel/numa_balancing
# "yes" when this user may write every weighted_interleave/nodeN file (root, as a rule): a
# capture cannot keep the files' permissions, and whether the weights can be set decides
# whether mem_policy=weighted can run there
WEIGHTS_WRITABLE = "weighted_interleave.writable"
EXTRAS = (CPUINFO, AFFINITY, CPU_MAX, MEMINFO, GPU_QUERY, GPU_TOPO, GPU_ERROR, NUMA_BALANCING,
          WEIGHTS_WRITABLE)
LIVE_NUMA_BALANCING = "/proc/sys/kernel/numa_balancing"

SYSFS_GLOBS = (
    "devices/system/cpu/online",
    "devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list",
    "devices/system/cpu/cpu[0-9]*/topology/core_cpus_list",
    "devices/system/cpu/cpu[0-9]*/topology/physical_package_id",
    # index3 is the L3 on x86: the CPUs sharing it form a core complex (numa_binding=core-complex)
    "devices/system/cpu/cpu[0-9]*/cache/index3/shared_cpu_list",
    "devices/system/cpu/cpu[0-9]*/cache/index3/level",
    "devices/system/node/online",
    "devices/system/node/node[0-9]*/cpulist",
    "devices/system/node/node[0-9]*/meminfo",
    "devices/system/node/node[0-9]*/distance",
    "devices/system/memory/block_size_bytes",
    "devices/system/node/node[0-9]*/memory_blocks",   # in a capture (see MEMORY_BLOCKS)
    # where memory lives (probe/memory.py): the firmware's speed of each node from its nearest
    # initiator (HMAT/CDAT), the kernel's memory tiers, the weighted-interleave weights
    "devices/system/node/node[0-9]*/access0/initiators/read_bandwidth",
    "devices/system/node/node[0-9]*/access0/initiators/read_latency",
    "devices/virtual/memory_tiering/memory_tier[0-9]*/nodelist",
    "kernel/mm/mempolicy/weighted_interleave/node[0-9]*",
    "kernel/mm/mempolicy/weighted_interleave/auto",
    "kernel/mm/mempolicy/weighted_interleave/__auto_type",
)
# Written by the collector: how many memory blocks the kernel has placed on a node (its memoryN
# links). The node's meminfo lags on VMs that initialise memory after boot (6.6 GiB, then 15.7 of
# the same 24 GiB), which moved this machine's fingerprint in the middle of a session.
MEMORY_BLOCKS = "memory_blocks"
GPU_QUERY_ARGV = ("nvidia-smi", "--query-gpu=index,name,memory.total",
                  "--format=csv,noheader,nounits")
GPU_TOPO_ARGV = ("nvidia-smi", "topo", "-m")


@dataclass(frozen=True)
class RawMachine:
    root: str               # where sysfs was read, for error messages
    files: dict[str, str]   # relative path -> text


def read_text(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", errors="replace")
    except IsADirectoryError:
        raise ProbeError(f"{path}: is a directory, expected a file") from None
    except OSError as exc:
        raise ProbeError(f"{path}: cannot read ({exc.strerror or exc})") from None


def collect_machine(sysfs_root: str | None = None) -> RawMachine:
    """Raw files of the live machine (sysfs_root None) or of a capture/replay directory."""
    root = os.path.abspath(sysfs_root) if sysfs_root is not None else LIVE_SYSFS
    if not os.path.isdir(root):
        why = "not a directory" if os.path.exists(root) else "no such directory"
        raise ProbeError(f"sysfs root {root}: {why}")
    files = {}
    for pattern in SYSFS_GLOBS:
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            files[os.path.relpath(path, root)] = read_text(path)
    for node in sorted(glob.glob(os.path.join(root, "devices/system/node/node[0-9]*"))):
        blocks = len(glob.glob(os.path.join(node, "memory[0-9]*")))
        if blocks:
            files[os.path.join(os.path.relpath(node, root), MEMORY_BLOCKS)] = f"{blocks}\n"
    if sysfs_root is None:
        files.update(_live_extras(has_nodes=any(p.startswith("devices/system/node/node")
                                                for p in files)))
        files.update(_live_memory_extras(root, files))
    else:
        for name in EXTRAS:
            path = os.path.join(root, name)
            if os.path.lexists(path):
                files[name] = read_text(path)
    return RawMachine(root=root, files=files)


def _live_extras(*, has_nodes: bool) -> dict[str, str]:
    extras = {AFFINITY: format_cpulist(os.sched_getaffinity(0)) + "\n"}
    if os.path.exists("/proc/cpuinfo"):
        extras[CPUINFO] = read_text("/proc/cpuinfo")
    if not re.search(r"^(flags|Features)\s*:", extras.get(CPUINFO, ""), re.MULTILINE):
        extras[CPUINFO] = _cpuinfo_from_py_cpuinfo() or extras.get(CPUINFO, "")
    if not has_nodes and os.path.exists("/proc/meminfo"):
        extras[MEMINFO] = read_text("/proc/meminfo")
    cpu_max = cgroup_cpu_max()
    if cpu_max:
        extras[CPU_MAX] = cpu_max
    if shutil.which("nvidia-smi"):
        query = _run(GPU_QUERY_ARGV, timeout=15)
        if query[0] == 0:
            extras[GPU_QUERY] = query[1]
            topo = _run(GPU_TOPO_ARGV, timeout=15)
            if topo[0] == 0:
                extras[GPU_TOPO] = topo[1]
        else:
            extras[GPU_ERROR] = _last_line(query[2] or query[1]) + "\n"
    return extras


def _live_memory_extras(root: str, files: dict[str, str]) -> dict[str, str]:
    """numa_balancing (a /proc file) and whether the weighted-interleave weights are writable."""
    extras = {}
    if os.path.exists(LIVE_NUMA_BALANCING):
        try:
            extras[NUMA_BALANCING] = read_text(LIVE_NUMA_BALANCING)
        except ProbeError:
            pass   # hidden in some containers: unknown, not an error
    weights = [os.path.join(root, p) for p in files
               if p.startswith("kernel/mm/mempolicy/weighted_interleave/node")]
    if weights:
        extras[WEIGHTS_WRITABLE] = "yes\n" if all(os.access(p, os.W_OK) for p in weights) \
            else "no\n"
    return extras


def _cpuinfo_from_py_cpuinfo() -> str:
    """Some sandboxes hide /proc/cpuinfo or its flags; py-cpuinfo asks CPUID itself (slow, so
    only then). Written in /proc/cpuinfo's format so the capture and the parser stay one."""
    try:
        import cpuinfo
        info = cpuinfo.get_cpu_info()
    except Exception:  # py-cpuinfo raises assorted errors on exotic platforms
        return ""
    return (f"processor\t: 0\nvendor_id\t: {info.get('vendor_id_raw', '')}\n"
            f"model name\t: {info.get('brand_raw', '')}\nflags\t\t: {' '.join(info.get('flags', []))}\n\n")


def cgroup_cpu_max(proc_cgroup: str = "/proc/self/cgroup", base: str = "/sys/fs/cgroup") -> str:
    """Every CPU limit on this process's cgroup path, innermost first, as "QUOTA PERIOD" lines.

    cgroup v2 keeps it in cpu.max; v1 in cpu.cfs_quota_us/cpu.cfs_period_us of the cpu
    controller. Without a cgroup namespace the path in /proc/self/cgroup may not exist under the
    mount (containers), so the mount root itself is always read too.
    """
    try:
        entries = read_text(proc_cgroup).splitlines()
    except ProbeError:
        return ""
    seen, lines = set(), []
    for entry in entries:
        hid, _, rest = entry.partition(":")
        controllers, _, path = rest.partition(":")
        if hid == "0" and controllers == "":
            mounts, v2 = [base, os.path.join(base, "unified")], True
        elif "cpu" in controllers.split(","):
            mounts, v2 = [os.path.join(base, d) for d in ("cpu,cpuacct", "cpuacct,cpu", "cpu")], False
        else:
            continue
        for mount in mounts:
            for d in _ancestors(mount, path):
                if d in seen:
                    continue
                seen.add(d)
                if v2 and os.path.isfile(os.path.join(d, "cpu.max")):
                    lines.append(read_text(os.path.join(d, "cpu.max")).strip())
                elif not v2 and os.path.isfile(os.path.join(d, "cpu.cfs_quota_us")):
                    quota = read_text(os.path.join(d, "cpu.cfs_quota_us")).strip()
                    period = read_text(os.path.join(d, "cpu.cfs_period_us")).strip()
                    lines.append(f"{quota} {period}")
    return "".join(f"{line}\n" for line in lines if line)


def _ancestors(mount: str, path: str) -> list[str]:
    parts = [p for p in path.split("/") if p]
    return [os.path.join(mount, *parts[:i]) for i in range(len(parts), -1, -1)]


def _run(argv, *, timeout: float) -> tuple[int, str, str]:
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                           env=child_env())
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout:g}s"
    except OSError as exc:
        return 127, "", str(exc)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def torch_version_file() -> str:
    """The text of the installed torch's version.py, found without importing torch ('' when
    torch is not installed)."""
    spec = importlib.util.find_spec("torch")
    if not spec or not spec.submodule_search_locations:
        return ""
    path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    return read_text(path) if os.path.isfile(path) else ""


