"""A user workload (module:function) that fails on one rank mid-training, for runner tests that
drive the real worker: the failing rank and its torn-connection victim both write results."""
from __future__ import annotations

import dataclasses
import os

from autotune.worker.workloads import WorkloadSpec, get_workload


def build(crash_rank: int = 1, after_batches: int = 4) -> WorkloadSpec:
    spec = get_workload("mlp")
    calls = [0]

    def make_batch(start: int, count: int, seed: int):
        calls[0] += 1
        if int(os.environ["RANK"]) == crash_rank and calls[0] > after_batches:
            raise ValueError(f"injected failure in make_batch on rank {crash_rank}")
        return spec.make_batch(start, count, seed)
    return dataclasses.replace(spec, make_batch=make_batch)
