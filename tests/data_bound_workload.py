"""A user's entry point whose step waits on its data (`--workload data_bound_workload:build`):
the built-in cnn with a heavy per-sample stage, `decode_ms` of CPU per sample, as a JPEG decoder
costs. The split (measure/split.py) should name data as its bottleneck."""
from __future__ import annotations

from autotune.workloads import get_workload


def build(decode_ms: float = 8.0):
    return get_workload("cnn", {"decode_ms": decode_ms})
