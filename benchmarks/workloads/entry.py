"""An entry point a user would write: `autotune search --workload benchmarks.workloads.entry:build`.

autotune's worker owns DDP wrapping, binding, precision and the timed loop; this file owns only
the model, the data, the loss and (optionally) the evaluation. Data is addressed by global sample
index so every rank and every configuration sees the same samples for the same (seed, batch).
"""
from __future__ import annotations

import torch
from torch import nn

from autotune.worker.workloads import WorkloadSpec

FEATURES, CLASSES = 64, 4


def _teacher(seed: int) -> torch.Tensor:
    return torch.randn((FEATURES, CLASSES), generator=torch.Generator().manual_seed(seed + 7))


def build(hidden: int = 256) -> WorkloadSpec:
    teacher = _teacher(0)

    def build_model(seed: int) -> nn.Module:
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(FEATURES, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                             nn.ReLU(), nn.Linear(hidden, CLASSES))

    def make_batch(start: int, count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        # one generator per (seed, first sample): the same indices give the same tensors anywhere
        g = torch.Generator().manual_seed(seed * 1_000_003 + start)
        x = torch.randn((count, FEATURES), generator=g)
        return x, (x @ teacher).argmax(dim=1)

    @torch.no_grad()
    def eval_fn(model: nn.Module) -> float:
        x, y = make_batch(1 << 40, 1024, 0)      # held out: far beyond any training index
        return float((model(x).argmax(dim=1) == y).float().mean())

    return WorkloadSpec(name="entry-mlp", build_model=build_model, make_batch=make_batch,
                        loss_fn=nn.functional.cross_entropy, eval_fn=eval_fn, metric="accuracy",
                        lr=0.05, num_classes=CLASSES,
                        # a small model: seeded quality runs of 8192 samples take about a second
                        quality_samples=8192)
