"""A user's entry point whose step waits on its data (issue 51): the built-in cnn's model and
samples, each sample costing some CPU to make, as decoding and resizing an image does (a busy
loop on the thread's CPU clock: the same data, the time spent). The cost per sample comes from
the environment, so a search (which cannot pass arguments to an entry point) gets it too:

    DATA_BOUND_DECODE_MS=2 autotune search --workload benchmarks.workloads.data_bound:build

Default 0.5 ms a sample, the issue's entry point.
"""
from __future__ import annotations

import os

from autotune.workloads import get_workload

DECODE_ENV = "DATA_BOUND_DECODE_MS"


def build(decode_ms: float | None = None):
    ms = float(os.environ.get(DECODE_ENV, "0.5")) if decode_ms is None else decode_ms
    return get_workload("cnn", {"decode_ms": ms})
