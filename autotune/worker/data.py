"""Where a rank's batches come from: in the rank (the CPU default), or a DataLoader pipeline.

A GPU rank starves when its host side cannot prepare batches as fast as the GPU eats them, so
the built-in workloads get a real CPU-side stage to tune: a Dataset whose __getitem__ generates
one sample (the "decode") and applies a random crop (4-pixel reflect padding) and a horizontal
flip to images, fed through a DataLoader with `dataloader_workers` processes and `pin_memory`.
Each sample's augmentation is seeded by (seed, global index), so every worker count and every
split of the batch over ranks trains on the same data.

The pipeline is used on GPUs and whenever a pipeline knob is set; CPU trials otherwise keep the
in-process batches (no per-sample overhead, the data every CPU study so far was measured on).
Augmented data is different data: `in_use` is part of what decides the accuracy a config shares.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, Sampler

from ..config import Config
from .synthetic import _sample_seed
from .workloads import WorkloadSpec, rank_slice

Batch = tuple[torch.Tensor, torch.Tensor]
PAD = 4


def in_use(config: dict[str, Any]) -> bool:
    return Config(**config).data_pipeline


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
    return _Pipeline(spec, config, rank=rank, batch_size=batch_size, world_size=world_size,
                     seed=seed)


class _Pipeline:
    """The DataLoader's batches, step by step; `close` ends its worker processes (a worker that
    serves several windows builds a new pipeline when a pipeline knob changes)."""

    def __init__(self, spec: WorkloadSpec, config: dict[str, Any], *, rank: int, batch_size: int,
                 world_size: int, seed: int) -> None:
        workers = int(config.get("dataloader_workers") or 0)
        loader = DataLoader(AugmentedSamples(spec.make_batch, seed),
                            batch_sampler=_RankSteps(rank, batch_size, world_size),
                            num_workers=workers, pin_memory=bool(config.get("pin_memory")),
                            persistent_workers=workers > 0,
                            prefetch_factor=4 if workers else None)
        self.batches: Any = iter(loader)
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
