"""Where a rank's batches come from: in the rank (the CPU default), or a DataLoader pipeline.

A GPU rank starves when its host side cannot prepare batches as fast as the GPU eats them, so
the built-in workloads get a real CPU-side stage to tune: a Dataset whose __getitem__ generates
one sample (the "decode") and applies a random crop (4-pixel reflect padding) and a horizontal
flip to images, fed through a DataLoader with `dataloader_workers` processes and `pin_memory`.
Each sample's augmentation is seeded by (seed, global index), so every worker count and every
split of the batch over ranks trains on the same data. Augmented data is different data:
Config.augmented_batches is part of what decides the accuracy a config shares.

On a CPU, DataLoader workers make the rank's own batches (issue 51): each makes whole steps'
batches (step k by worker k mod N) with the workload's make_batch, exactly as the rank would,
while the rank computes the steps before. The same tensors in the same order: the same math as the in-process batches, so a
CPU's workers are measured on speed alone. Without workers a CPU rank makes its batches itself.
"""
from __future__ import annotations

import os
import warnings
from functools import partial
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, Sampler

from ..config import Config
from .synthetic import _sample_seed
from .workloads import WorkloadSpec, get_workload, rank_slice

Batch = tuple[torch.Tensor, torch.Tensor]
PAD = 4
# The CPUs this rank was started on (its binding's set, or all), read at import, before OpenMP
# runs: Intel OpenMP's KMP_AFFINITY then pins the main thread to one of them, and forked
# DataLoader workers would inherit that one CPU. Each worker is spread over the set again.
_STARTED_ON = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def in_use(config: dict[str, Any]) -> bool:
    """Batches come through a DataLoader (augmented on GPUs, the rank's own by workers on CPUs)."""
    c = Config(**config)
    return c.augmented_batches or c.dataloader_workers > 0


class AugmentedSamples(Dataset):
    """Sample i of the workload, image samples randomly cropped and flipped."""

    def __init__(self, make_batch: Callable[[int, int, int], Batch], seed: int) -> None:
        self.make_batch, self.seed = make_batch, seed

    def __len__(self) -> int:
        return 1 << 62   # addressed by global index; the sampler decides which ones

    def __getitem__(self, index: int) -> Batch:
        x, y = self.make_batch(index, 1, self.seed)
        return augment(x[0], index, self.seed), y[0]


def augment(x: torch.Tensor, index: int, seed: int) -> torch.Tensor:
    """Random crop and flip of one CHW image (other inputs pass through), seeded by the index."""
    if x.dim() != 3 or min(x.shape[1:]) <= PAD:
        return x
    g = torch.Generator().manual_seed(_sample_seed(seed ^ 0x5EED, index))
    top, left = (int(v) for v in torch.randint(0, 2 * PAD + 1, (2,), generator=g))
    padded = F.pad(x.unsqueeze(0), (PAD, PAD, PAD, PAD), mode="reflect")[0]
    out = padded[:, top:top + x.shape[1], left:left + x.shape[2]]
    if bool(torch.rand((), generator=g) < 0.5):
        out = out.flip(-1)
    return out.contiguous()


class RankBatches(Dataset):
    """Item k: this rank's batch of step k, made by the workload's make_batch as the rank makes
    it without workers (a CPU's workers: the same batches, made beside the step)."""

    def __init__(self, make_batch: Callable[[int, int, int], Batch], seed: int, *, rank: int,
                 batch_size: int, world_size: int) -> None:
        self.make_batch, self.seed = make_batch, seed
        self.rank, self.batch_size, self.world_size = rank, batch_size, world_size

    def __len__(self) -> int:
        return 1 << 62   # addressed by step; the sampler goes through them in order

    def __getitem__(self, step: int) -> Batch:
        return self.make_batch(*rank_slice(step, self.rank, self.batch_size, self.world_size),
                               self.seed)


class _Steps(Sampler):
    """0, 1, 2, ...: the steps, in order."""

    def __iter__(self) -> Iterator[int]:
        step = 0
        while True:
            yield step
            step += 1


class _RankSteps(Sampler):
    """The global indices of this rank's slice of step 0, 1, 2, ... (one list per batch)."""

    def __init__(self, rank: int, batch_size: int, world_size: int) -> None:
        self.rank, self.batch_size, self.world_size = rank, batch_size, world_size

    def __iter__(self) -> Iterator[list[int]]:
        step = 0
        while True:
            start, count = rank_slice(step, self.rank, self.batch_size, self.world_size)
            yield list(range(start, start + count))
            step += 1


def batch_source(spec: WorkloadSpec, config: dict[str, Any], *, rank: int, batch_size: int,
                 world_size: int, seed: int) -> Callable[[int], Batch]:
    """`get(step)` -> this rank's batch of that step. The pipeline serves steps in order only."""
    if not in_use(config):
        return lambda step: spec.make_batch(*rank_slice(step, rank, batch_size, world_size), seed)
    return _Pipeline(loader(spec, config, rank=rank, batch_size=batch_size,
                            world_size=world_size, seed=seed))


def loader(spec: WorkloadSpec, config: dict[str, Any], *, rank: int, batch_size: int,
           world_size: int, seed: int, context: str | None = None,
           timeout_s: float = 0) -> DataLoader:
    """The DataLoader of a configuration's pipeline: per sample, augmented (GPU trials), or the
    rank's own batches (a CPU's workers). `context`: the workers' start method (None: the
    platform's, which the trials use)."""
    workers = int(config.get("dataloader_workers") or 0)
    common: dict[str, Any] = {"num_workers": workers, "persistent_workers": workers > 0,
                              "worker_init_fn": partial(_spread, _STARTED_ON) if workers else None,
                              "prefetch_factor": 4 if workers else None,
                              "pin_memory": bool(config.get("pin_memory")),
                              "multiprocessing_context": context if workers else None,
                              "timeout": timeout_s if workers else 0}
    if Config(**config).augmented_batches:
        return DataLoader(AugmentedSamples(spec.make_batch, seed),
                          batch_sampler=_RankSteps(rank, batch_size, world_size), **common)
    return DataLoader(RankBatches(spec.make_batch, seed, rank=rank, batch_size=batch_size,
                                  world_size=world_size),
                      batch_size=None, sampler=_Steps(), **common)


def _spread(cpus: frozenset[int] | None, worker_id: int) -> None:
    """A DataLoader worker's first act: run on any of the rank's CPUs, not on the one its
    OpenMP runtime may have pinned the rank's main thread to."""
    if cpus and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, cpus)
        except OSError:   # a CPU taken out of this cgroup since: keep what it inherited
            pass


class _Pipeline:
    """The DataLoader's batches, step by step; `close` ends its worker processes (a worker that
    serves several windows builds a new pipeline when a pipeline knob changes)."""

    def __init__(self, batches: DataLoader) -> None:
        self.batches: Any = iter(batches)
        self.served = 0

    def __call__(self, step: int) -> Batch:
        if step != self.served:
            raise RuntimeError(f"the data pipeline serves steps in order: asked for {step}, "
                               f"next is {self.served}")
        self.served += 1
        return next(self.batches)

    def close(self) -> None:
        shutdown = getattr(self.batches, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
        self.batches = None


def pipeline_facts(name: str, args: dict[str, Any] | None = None, *, device: str = "cpu",
                   context: str | None = None) -> tuple[bool, str | None]:
    """(whether trials of the workload batch through a pipeline DataLoader workers can take
    over: always on GPUs, on CPUs where the workload has a per-sample pipeline of its own
    (WorkloadSpec.data_pipeline); why its samples cannot be made in a worker process, or None),
    from the workload built in this process."""
    spec = get_workload(name, args)
    if device != "cuda" and not spec.data_pipeline:
        return False, None
    return True, worker_problem(spec, device=device, context=context)


def worker_problem(spec: WorkloadSpec, *, device: str = "cpu", context: str | None = None,
                   timeout_s: float = 60.0) -> str | None:
    """Why the workload's samples cannot be made in a DataLoader worker process, or None: one
    worker started as the trials start theirs (`context`: the start method, None the
    platform's) makes one batch of two samples. Under spawn or forkserver the dataset is pickled
    into the worker (a lambda cannot be); under fork it is not, but a sample may still need what
    only the parent has (a CUDA context, a handle opened there)."""
    config = {"dataloader_workers": 1, "device": device}
    try:
        with warnings.catch_warnings():   # torch's advice on start methods: the line says why
            warnings.simplefilter("ignore", UserWarning)
            batches = _Pipeline(loader(spec, config, rank=0, batch_size=2, world_size=1, seed=0,
                                       context=context, timeout_s=timeout_s))
        try:
            batches(0)
        finally:
            batches.close()
    except Exception as exc:  # noqa: BLE001 - whatever stops a worker is the reason
        return _one_line(exc)
    return None


def _one_line(exc: BaseException) -> str:
    """The error as one line: a worker's exception arrives with its whole traceback in the
    message ("Caught ValueError in DataLoader worker process 0. Original Traceback ..."), whose
    last line is the error itself."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if "Original Traceback" in str(exc) and lines:
        text = lines[-1]
    else:
        text = f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text if len(text) <= 200 else text[:197] + "..."
