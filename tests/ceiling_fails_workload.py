"""An entry point whose batches can be made once each and no more (`ceiling_fails_workload:build`):
like a stream read once. Training sees every step's batch once; the ceiling, which makes the
first steps' batches again to keep them resident, cannot be taken, and says so."""
from __future__ import annotations

import dataclasses

from autotune.workloads import get_workload


def build():
    spec = get_workload("cnn")
    made: set[int] = set()

    def once(start: int, count: int, seed: int):
        if start in made and start < (1 << 40):      # held-out samples may be read again
            raise RuntimeError(f"sample {start} was read already: this stream is read once")
        made.add(start)
        return spec.make_batch(start, count, seed)
    return dataclasses.replace(spec, make_batch=once)
