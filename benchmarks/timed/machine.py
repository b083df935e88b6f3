"""The machine a benchmark ran on, for its results file: CPU model, family, model and stepping
from /proc/cpuinfo, cores, Python, the date and, where wanted, autotune's topology fingerprint."""
from __future__ import annotations

import os
import platform
import time
from typing import Any


def describe(*, fingerprint: bool = False) -> dict[str, Any]:
    info: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(),
                            "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "cpu family", "model", "stepping") and key not in info:
                    info[key] = value.strip()
    except OSError:
        pass
    if fingerprint:
        from autotune.probe import probe
        info["fingerprint"] = probe().fingerprint()
    return info
