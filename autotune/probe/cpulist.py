"""Linux cpulists ("0-3,8,10-11") read and written: a leaf of probe/ that parse.py and memory.py
both use (memory.py is below topology.py, which parse.py imports)."""
from __future__ import annotations

import re

from ..errors import ProbeError

_RANGE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+)/(\d+))?)?$")


def parse_cpulist(text: str, *, where: str = "cpulist") -> tuple[int, ...]:
    """Linux cpulist ("0-3,8,10-11", "" for none, "0-31:2/4" group syntax) -> sorted CPU ids."""
    cpus: set[int] = set()
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        m = _RANGE.match(part)
        if not m:
            raise ProbeError(f"{where}: cannot parse cpulist {text.strip()!r}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise ProbeError(f"{where}: bad range {part!r} in cpulist {text.strip()!r}")
        used, group = (int(m.group(3)), int(m.group(4))) if m.group(3) else (1, 1)
        if group == 0 or used == 0:
            raise ProbeError(f"{where}: bad group {part!r} in cpulist {text.strip()!r}")
        cpus.update(c for c in range(lo, hi + 1) if (c - lo) % group < used)
    return tuple(sorted(cpus))


def format_cpulist(cpus) -> str:
    """Sorted CPU ids -> compact cpulist ("0-31,64-95"); inverse of parse_cpulist."""
    ids = sorted(set(cpus))
    out, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(out)
