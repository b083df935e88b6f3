"""`autotune probe`: the machine as the tuner sees it, or a captured one, optionally captured."""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..probe import capture, probe as probe_machine
from ..probe.render import render
from ..probe.topology import Topology


@dataclass(frozen=True, kw_only=True)
class ProbeRequest:
    sysfs_root: str | None = None   # a captured tree instead of this machine
    capture: str | None = None      # write every file the probe reads into this folder first


@dataclass(frozen=True)
class Probed:
    topology: Topology
    source: str | None
    captured: str | None            # the line saying what was captured, where, and how to replay

    def text(self) -> str:
        return render(self.topology, source=self.source)


def probe(req: ProbeRequest) -> Probed:
    captured = None
    if req.capture:
        written = capture(req.capture, sysfs_root=req.sysfs_root)
        captured = (f"captured {len(written)} files into {os.path.abspath(req.capture)}; "
                    f"replay with: autotune probe --sysfs-root {req.capture}")
    return Probed(probe_machine(req.sysfs_root), req.sysfs_root, captured)
