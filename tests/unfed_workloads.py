"""Entry points whose samples a DataLoader worker process may not be able to make (issue 51):
the search rules `dataloader_workers` out for them in one line and goes on without it.

- `parent_only`: each sample needs a handle only the process that built the workload has, as a
  dataset holding a CUDA context or a connection opened there does; a worker process cannot
  make it, whatever the start method.
- `lambda_samples`: make_batch is a lambda. A forked worker (Linux's start method before Python
  3.14) runs it as it is; a spawned or forkserver one (Python 3.14's default on Linux, macOS)
  must unpickle it, and cannot.
"""
from __future__ import annotations

import os

import torch

from autotune.workloads import WorkloadSpec, get_workload


def parent_only(decode_ms: float = 0.5):
    cnn = get_workload("cnn", {"decode_ms": decode_ms})
    owner = os.getpid()

    def make_batch(start: int, count: int, seed: int):
        if os.getpid() != owner:
            raise RuntimeError("this dataset's handle belongs to the process that opened it")
        return cnn.make_batch(start, count, seed)

    return WorkloadSpec(name="parent_only", build_model=cnn.build_model, make_batch=make_batch,
                        input_is_image=True, lr=cnn.lr)


def lambda_samples():
    return WorkloadSpec(
        name="lambda_samples", build_model=lambda seed: torch.nn.Linear(4, 10),
        make_batch=lambda start, count, seed: (torch.ones(count, 4),
                                               torch.arange(start, start + count) % 10))
