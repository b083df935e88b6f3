"""What a captured machine can do: its capability facts, recorded by `autotune probe --capture`
and read back when a capture is replayed, so that a plan for that machine is judged by that
machine (a person on a CPU login node planning for the GPU node they will run on) rather than by
the machine running autotune.

The file holds the raw facts (collect_capabilities.py: torch's CUDA and backends, libraries,
tools), not the Capabilities value, so replay parses them with the same build_capabilities as a
live probe: collect on that machine, parse anywhere. Captures made before this file existed have
none; for them the GPUs a capture lists imply a CUDA build of torch with NCCL, and the probe says
so in a warning (libraries and tools are then this machine's, as they always were).
"""
from __future__ import annotations

import copy
import json
import os
from typing import Any

from ..util.atomic_json import read_json
from ..errors import ProbeError
from .capabilities import ALLOCATOR_NAMES, IOMP_NAMES, build_capabilities
from .topology import Capabilities

CAPABILITIES = "capabilities.json"   # at the root of a capture, beside cpuinfo
SCHEMA = 1


def facts_text(raw: dict[str, Any]) -> str:
    """The capture file's text for raw capability facts of the machine being captured."""
    return json.dumps({"schema": SCHEMA, "facts": _trimmed(raw)}, indent=1, sort_keys=True) + "\n"


def _trimmed(raw: dict[str, Any]) -> dict[str, Any]:
    """The facts without the `ldconfig -p` lines the parser never reads (every system library,
    50 KB on a plain Ubuntu): only the allocators' and OpenMP runtimes' lines stay."""
    out = copy.deepcopy(raw)
    ldconfig = (out.get("results") or {}).get("ldconfig")
    if ldconfig and ldconfig.get("stdout"):
        wanted = tuple(n for names in ALLOCATOR_NAMES.values() for n in names) + IOMP_NAMES
        ldconfig["stdout"] = "".join(line + "\n" for line in ldconfig["stdout"].splitlines()
                                     if line.strip().split(" ", 1)[0] in wanted)
    return out


def read_facts(root: str) -> dict[str, Any] | None:
    """The raw facts recorded in a capture, or None when it has no capabilities file."""
    path = os.path.join(root, CAPABILITIES)
    if not os.path.lexists(path):
        return None
    doc = read_json(path, unreadable=lambda why: ProbeError(f"{path}: cannot read ({why})"),
                    malformed=lambda why: ProbeError(f"{path}: not valid JSON ({why}); capture "
                                                     "the machine again with `autotune probe "
                                                     "--capture DIR`"))
    if not isinstance(doc, dict) or not isinstance(doc.get("facts"), dict):
        raise ProbeError(f"{path}: no \"facts\" object; capture the machine again with "
                         "`autotune probe --capture DIR`")
    if doc.get("schema") != SCHEMA:
        raise ProbeError(f"{path}: schema {doc.get('schema')!r}, this autotune reads {SCHEMA}; "
                         "capture the machine again with this version")
    return doc["facts"]


def replay_capabilities(root: str, num_gpus: int, live_facts
                        ) -> tuple[Capabilities, tuple[str, ...]]:
    """The capabilities of the captured machine at `root`. `live_facts`: a callable giving this
    machine's raw facts, used only for a capture that recorded none."""
    facts = read_facts(root)
    if facts is not None:
        return build_capabilities(facts, num_gpus=num_gpus)
    facts = live_facts()
    if not num_gpus:
        return build_capabilities(facts, num_gpus=0)
    caps, warnings = build_capabilities(assume_cuda(facts, num_gpus), num_gpus=num_gpus)
    return caps, warnings + (
        f"the capture has no {CAPABILITIES} (older than this autotune): "
        f"assuming its {num_gpus} GPU(s) have a CUDA build of torch with NCCL; libraries and "
        "tools are this machine's. Capture it again with `autotune probe --capture DIR` to "
        "plan by what it really has",)


def assume_cuda(facts: dict[str, Any], num_gpus: int) -> dict[str, Any]:
    """`facts` with torch's check rewritten as a CUDA build that sees `num_gpus` GPUs and has
    NCCL: what a GPU server runs trials with."""
    out = copy.deepcopy(facts)
    check = (out.setdefault("results", {}).get("torch") or {})
    try:
        info = json.loads((check.get("stdout") or "").strip().splitlines()[-1])
    except (ValueError, IndexError):
        info = {"version": (out.get("versions") or {}).get("torch")}
    info.update(distributed=True, gloo=True, nccl=True, cuda=True, cuda_devices=num_gpus)
    out["results"]["torch"] = {"rc": 0, "stdout": json.dumps(info) + "\n", "stderr": ""}
    return out
