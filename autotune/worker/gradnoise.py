"""Inside a rank: the gradient noise probe of a quality run (McCandlish et al. 2018).

At the end of a quality run each rank splits its share of a few fresh global batches into two
halves and computes each half's gradient on the bare module (no DDP hooks, no optimizer step):
the halves give |G_b|^2 at the small batch b, and their all-reduced mean gives |G_B|^2 at the
global batch B of the same step. quality.noise_scale turns these into B_noise. BatchNorm running
statistics are restored afterwards so the probe changes nothing a later evaluation sees.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
import torch.distributed as dist


def probe(module: torch.nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]],
          loss_fn: Callable, amp: Callable, world_size: int,
          device: torch.device | None = None) -> dict[str, Any] | None:
    """`batches`: this rank's share of each probe step. Returns the squared norms (identical on
    every rank) or None when a share cannot be halved."""
    params = [p for p in module.parameters() if p.requires_grad]
    saved = [(b, b.detach().clone()) for b in module.buffers()]
    small_sq: list[float] = []
    big_sq: list[float] = []
    half = None
    for x, y in batches:
        half = x.shape[0] // 2
        if half < 1:
            return None
        grads = []
        for lo in (0, half):
            module.zero_grad(set_to_none=True)
            with amp():
                loss = loss_fn(module(x[lo:lo + half]), y[lo:lo + half])
            loss.float().backward()
            grads.append(torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p))
                                    .detach().float().flatten() for p in params]))
        # the collective's device: NCCL reduces CUDA tensors only
        local = torch.tensor([float(g.pow(2).sum()) for g in grads], dtype=torch.float64,
                             device=device)
        total = (grads[0] + grads[1])
        dist.all_reduce(total)
        total /= 2 * world_size
        dist.all_reduce(local)
        small_sq.append(float(local.sum()) / (2 * world_size))
        big_sq.append(float(total.double().pow(2).sum()))
    module.zero_grad(set_to_none=True)
    with torch.no_grad():
        for buf, value in saved:
            buf.copy_(value)
    return {"small_sq": small_sq, "big_sq": big_sq, "small": half, "big": 2 * half * world_size}
