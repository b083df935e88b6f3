"""The timers that split a rank's step into its phases (measure/split.py names them and does the
arithmetic): wall-clock marks on a CPU, CUDA events on a GPU.

A CUDA step runs asynchronously: a CPU timer around `model(x)` measures the time to enqueue the
kernels, not to run them. Events recorded on the current stream at each phase boundary are
timestamps of the GPU's own timeline, read once the step has synchronised (it does anyway, see
worker/device.synchronize). On a CPU the marks are perf_counter readings. Either way a mark costs
microseconds against steps of milliseconds (benchmarks/timed/split_timers.py measures it).

The all-reduce is told apart through DDP's comm hook: the hook marks when the last gradient
bucket is handed to the all-reduce, which is when backward's own computation ends; what backward
takes after that mark is the wait for the all-reduce to finish.
"""
from __future__ import annotations

import time
from typing import Any

import torch

from ..measure.split import PHASES


class PhaseClock:
    """Each phase's seconds summed over the steps since `reset`. `enabled` False: every call
    does nothing (the overhead benchmark's other side)."""

    def __init__(self, *, cuda: bool, enabled: bool = True) -> None:
        self.cuda, self.enabled = cuda, enabled
        self.comm_told = False
        self._marks: list[tuple[str, Any]] = []
        self.reset()

    def reset(self) -> None:
        """Start the totals afresh (the timed window's first step comes next)."""
        self.totals = {p: 0.0 for p in PHASES if p != "allreduce" or self.comm_told}

    def _now(self) -> Any:
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def begin(self) -> None:
        if self.enabled:
            self._marks = [("", self._now())]

    def lap(self, phase: str) -> None:
        """The time since the last mark belongs to `phase`."""
        if self.enabled and self._marks:
            self._marks.append((phase, self._now()))

    def comm_mark(self) -> None:
        """Called by the comm hook as a bucket goes to the all-reduce (the last call wins)."""
        if self.enabled and self._marks:
            self._marks.append(("_comm", self._now()))

    def end_step(self) -> None:
        """Add this step's phases to the totals (after the step synchronised its device)."""
        if not (self.enabled and self._marks):
            return
        prev, comm = self._marks[0][1], None
        for phase, mark in self._marks[1:]:
            if phase == "_comm":
                comm = mark
                continue
            if phase == "compute" and comm is not None and "allreduce" in self.totals:
                self.totals["compute"] += self._seconds(prev, comm)
                self.totals["allreduce"] += self._seconds(comm, mark)
            else:
                self.totals[phase] = self.totals.get(phase, 0.0) + self._seconds(prev, mark)
            prev, comm = mark, None
        self._marks = []

    def _seconds(self, a: Any, b: Any) -> float:
        return max(0.0, a.elapsed_time(b) / 1000.0) if self.cuda else max(0.0, b - a)

    def report(self) -> dict[str, float] | None:
        return {p: round(s, 6) for p, s in self.totals.items()} if self.enabled else None


def tell_allreduce_apart(ddp: Any, clock: PhaseClock, *, world_size: int) -> None:
    """Register the comm hook that marks each bucket's hand-over to the all-reduce (DDP's own
    allreduce hook does the work, the same sum-then-average as its built-in path). Not with one
    rank (nothing to wait for). A compiled launch compiles the model inside DDP (worker/
    trainer.py), whose reducer stays eager: its hook marks the buckets as for eager."""
    if not clock.enabled or world_size < 2:
        return
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    def marked(state, bucket):   # unannotated: DDP checks a hook's annotations against its own
        clock.comm_mark()
        return allreduce_hook(state, bucket)

    ddp.register_comm_hook(None, marked)
    clock.comm_told = True
    clock.reset()
