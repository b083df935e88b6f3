"""Pure parsers: raw sysfs/procfs text (as collected or replayed) -> topology values.

Nothing here touches the machine. Every function takes text and returns values, so the same code
parses the live machine, a capture made with `autotune probe --capture`, and the test fixtures.
Input is what Linux really writes: sparse node ids, offline CPUs, missing files on VMs, trailing
newlines. Garbled input raises ProbeError naming the file.
"""
from __future__ import annotations

import re
from typing import Mapping

from ..errors import ProbeError
from .cpulist import format_cpulist, parse_cpulist  # noqa: F401 - also read from here
from .topology import INTERESTING_FLAGS, Core, Isa, NumaNode, TorchBuild

CPU_DIR = "devices/system/cpu"
NODE_DIR = "devices/system/node"
ONLINE = f"{CPU_DIR}/online"

_CPU_TOPO = re.compile(r"^devices/system/cpu/cpu(\d+)/topology/(\w+)$")
_NODE_FILE = re.compile(r"^devices/system/node/node(\d+)/(\w+)$")


def parse_int(text: str, *, where: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ProbeError(f"{where}: expected an integer, got {text.strip()[:40]!r}") from None


def parse_node_meminfo(text: str, *, where: str = "meminfo") -> int:
    """Bytes of MemTotal from node meminfo ("Node 0 MemTotal:  123 kB") or /proc/meminfo."""
    m = re.search(r"^(?:Node\s+\d+\s+)?MemTotal:\s*(\d+)\s*(kB)?\s*$", text, re.MULTILINE)
    if not m:
        raise ProbeError(f"{where}: no MemTotal line")
    return int(m.group(1)) * (1024 if m.group(2) else 1)


def parse_cpu_max(text: str, *, where: str = "cpu.max") -> float | None:
    """CPU quota in CPUs from cgroup limits, or None for unlimited.

    Each line is "QUOTA PERIOD": cgroup v2 cpu.max ("max 100000", "200000 100000") or a v1 pair
    (cpu.cfs_quota_us, cpu.cfs_period_us; quota -1 = unlimited). Several lines (one per level of
    the cgroup hierarchy) combine to the tightest, as the kernel enforces every level.
    """
    quota: float | None = None
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if len(fields) > 2 or (fields[0] != "max" and not re.fullmatch(r"-?\d+", fields[0])) or \
                (len(fields) == 2 and not fields[1].isdigit()):
            raise ProbeError(f"{where}: cannot parse {line.strip()!r} (want 'QUOTA PERIOD')")
        if fields[0] == "max" or int(fields[0]) < 0:
            continue
        period = int(fields[1]) if len(fields) == 2 else 100000
        if period <= 0:
            raise ProbeError(f"{where}: period must be positive in {line.strip()!r}")
        q = int(fields[0]) / period
        quota = q if quota is None else min(quota, q)
    return quota


def parse_cpuinfo(text: str) -> Isa:
    """Vendor, model name and the flags that matter, from the first processor in /proc/cpuinfo."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # first processor block is enough; flags are uniform across CPUs
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip().lower(), value.strip())
    vendor_raw = fields.get("vendor_id", "")
    vendor = {"GenuineIntel": "intel", "AuthenticAMD": "amd", "HygonGenuine": "hygon"}.get(
        vendor_raw, vendor_raw.lower() or ("arm" if "cpu implementer" in fields else "unknown"))
    model = fields.get("model name") or fields.get("cpu model") or fields.get("cpu") or "unknown"
    flags = set((fields.get("flags") or fields.get("features") or "").split())
    # x86 names the generation by CPUID family/model/stepping; ARM by implementer/part/revision.
    ids = [_cpuid(fields, *keys) for keys in (("cpu family", "cpu implementer"),
                                              ("model", "cpu part"), ("stepping", "cpu revision"))]
    return Isa(vendor=vendor, model_name=" ".join(model.split()),
               flags=tuple(f for f in sorted(INTERESTING_FLAGS) if f in flags),
               family=ids[0], model=ids[1], stepping=ids[2])


def _cpuid(fields: Mapping[str, str], x86_key: str, arm_key: str) -> int | None:
    """A CPUID number (decimal on x86, 0x-prefixed hex on ARM); None when absent or garbled."""
    text = fields.get(x86_key) or fields.get(arm_key) or ""
    try:
        return int(text, 0) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return None


def parse_torch_version(text: str) -> TorchBuild:
    """torch/version.py (plain `name = 'literal'` lines, written by torch's build) -> TorchBuild.
    Read as text, not imported: report and export must not pay seconds for `import torch`."""
    import ast
    values: dict[str, object] = {}
    for m in re.finditer(r"^(\w+)\s*(?::[^=\n]*)?=\s*(.+?)\s*$", text, re.MULTILINE):
        try:
            values[m.group(1)] = ast.literal_eval(m.group(2))
        except (ValueError, SyntaxError):
            continue
    accel = next((f"{k} {values[k]}" for k in ("cuda", "hip", "xpu") if values.get(k)), None)
    git = values.get("git_version")
    return TorchBuild(version=str(values.get("__version__") or "unknown"),
                      git_version=str(git) if git and git != "Unknown" else None,
                      accelerator=accel, debug=bool(values.get("debug", False)))


def node_ids(files: Mapping[str, str]) -> tuple[int, ...]:
    """NUMA node ids present (sparse ids like 0, 2 are normal) from the collected file names."""
    return tuple(sorted({int(m.group(1)) for p in files if (m := _NODE_FILE.match(p))}))


def parse_nodes(files: Mapping[str, str], online: tuple[int, ...], *, root: str
                ) -> tuple[tuple[NumaNode, ...], tuple[tuple[int, ...], ...]]:
    """NUMA nodes (CPUs restricted to online ones) and the distance matrix in node order.

    A kernel without NUMA has no node directory: the whole machine is one node 0, sized from
    /proc/meminfo when it was captured.
    """
    ids = node_ids(files)
    if not ids:
        mem = files.get("meminfo")
        size = parse_node_meminfo(mem, where=f"{root}/meminfo") if mem else 0
        return (NumaNode(id=0, cpus=online, memory_bytes=size),), ((10,),)
    online_set = set(online)
    nodes = []
    for nid in ids:
        base = f"{NODE_DIR}/node{nid}"
        cpus = parse_cpulist(files.get(f"{base}/cpulist", ""), where=f"{root}/{base}/cpulist")
        meminfo = files.get(f"{base}/meminfo")
        mem = parse_node_meminfo(meminfo, where=f"{root}/{base}/meminfo") if meminfo else 0
        mem = max(mem, _block_bytes(files, base, root=root))
        nodes.append(NumaNode(id=nid, cpus=tuple(c for c in cpus if c in online_set),
                              memory_bytes=mem))
    return tuple(nodes), _distances(files, ids, root=root)


def _block_bytes(files: Mapping[str, str], base: str, *, root: str) -> int:
    """A node's memory as the kernel's memory blocks on it (what is installed; 0 when not
    collected): its meminfo MemTotal can lag far behind on VMs that initialise memory late."""
    blocks = files.get(f"{base}/memory_blocks")
    size = files.get("devices/system/memory/block_size_bytes")
    if not blocks or not size:
        return 0
    try:
        return int(blocks) * int(size.strip(), 16)   # block_size_bytes is hexadecimal
    except ValueError:
        raise ProbeError(f"{root}/{base}: memory blocks {blocks.strip()!r} x "
                         f"{size.strip()!r} is not a size") from None


def _distances(files: Mapping[str, str], ids: tuple[int, ...], *, root: str
               ) -> tuple[tuple[int, ...], ...]:
    # Each node's distance file lists one entry per *online* node, in id order.
    online_text = files.get(f"{NODE_DIR}/online")
    columns = parse_cpulist(online_text, where=f"{root}/{NODE_DIR}/online") if online_text else ids
    rows = []
    for nid in ids:
        path = f"{NODE_DIR}/node{nid}/distance"
        if path not in files:
            return ()  # no distances captured: unknown, not an error
        values = files[path].split()
        if not all(v.isdigit() for v in values) or len(values) != len(columns):
            raise ProbeError(f"{root}/{path}: expected {len(columns)} distances for nodes "
                             f"{format_cpulist(columns)}, got {files[path].strip()[:60]!r}")
        by_node = dict(zip(columns, map(int, values)))
        rows.append(tuple(by_node.get(other, 0) for other in ids))
    return tuple(rows)


def parse_cores(files: Mapping[str, str], online: tuple[int, ...], nodes: tuple[NumaNode, ...],
                *, root: str) -> tuple[tuple[Core, ...], int]:
    """Physical cores from thread_siblings_list (never from CPU numbering) and the socket count.

    Older kernels lack core_cpus_list and some VMs lack physical_package_id (or report -1): the
    sibling list then falls back to core_cpus_list or the CPU alone, and the socket to 0.
    """
    online_set = set(online)
    node_of = {cpu: n.id for n in nodes for cpu in n.cpus}
    siblings: dict[int, set[int]] = {}
    socket_of: dict[int, int] = {}
    for cpu in online:  # every CPU's files are parsed, so a garbled one is never skipped
        base = f"{CPU_DIR}/cpu{cpu}/topology"
        sib_path = next((f"{base}/{name}" for name in ("thread_siblings_list", "core_cpus_list")
                         if f"{base}/{name}" in files), None)
        sibs = set(parse_cpulist(files[sib_path], where=f"{root}/{sib_path}")) if sib_path else set()
        siblings[cpu] = {c for c in sibs if c in online_set} | {cpu}
        pkg_path = f"{base}/physical_package_id"
        socket_of[cpu] = max(0, parse_int(files[pkg_path], where=f"{root}/{pkg_path}")
                             if pkg_path in files else 0)
    seen: set[int] = set()
    cores = []
    for cpu in online:
        if cpu in seen:
            continue
        cpus = tuple(sorted(siblings[cpu] - seen))
        seen.update(cpus)
        cores.append(Core(socket=socket_of[cpu], node=node_of.get(cpus[0]), cpus=cpus))
    cores.sort(key=lambda c: c.cpus[0])
    return tuple(cores), len({c.socket for c in cores})


def parse_online(files: Mapping[str, str], *, root: str) -> tuple[int, ...]:
    if ONLINE not in files:
        raise ProbeError(f"sysfs root {root}: {ONLINE} missing")
    online = parse_cpulist(files[ONLINE], where=f"{root}/{ONLINE}")
    if not online:
        raise ProbeError(f"{root}/{ONLINE}: no online CPUs in {files[ONLINE].strip()[:40]!r}")
    return online


def parse_usable(files: Mapping[str, str], online: tuple[int, ...], *, root: str
                 ) -> tuple[int, ...]:
    """The affinity mask (captured as a cpulist) restricted to online CPUs; all online if absent."""
    text = files.get("affinity")
    if text is None:
        return online
    allowed = set(parse_cpulist(text, where=f"{root}/affinity"))
    usable = tuple(c for c in online if c in allowed)
    if not usable:
        raise ProbeError(f"{root}/affinity: {text.strip()!r} holds no online CPU")
    return usable


def parse_l3(files: Mapping[str, str], online: tuple[int, ...], *, root: str
             ) -> tuple[tuple[int, ...], ...]:
    """Groups of online CPUs sharing an L3 cache (cpuN/cache/index3/shared_cpu_list), sorted.

    () when no CPU has the file (VMs, some ARM kernels, older captures): core-complex binding is
    then not offered rather than guessed. An index3 whose level file says other than 3 is not an
    L3 and is ignored.
    """
    online_set = set(online)
    domains: set[tuple[int, ...]] = set()
    for cpu in online:
        base = f"{CPU_DIR}/cpu{cpu}/cache/index3"
        if f"{base}/shared_cpu_list" not in files:
            continue
        level = files.get(f"{base}/level")
        if level is not None and parse_int(level, where=f"{root}/{base}/level") != 3:
            continue
        shared = parse_cpulist(files[f"{base}/shared_cpu_list"],
                               where=f"{root}/{base}/shared_cpu_list")
        domains.add(tuple(c for c in shared if c in online_set) or (cpu,))
    return tuple(sorted(domains))
