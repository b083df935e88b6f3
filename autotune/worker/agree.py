"""What the ranks of a trial agree on through a collective: how many steps the timed window has
(rank 0 decides from its warmup) and the held-out accuracy (counted on every rank, summed)."""
from __future__ import annotations

import contextlib
import math

import torch
import torch.distributed as dist

from ..plan.launch_plan import WorkerRequest
from .workloads import EVAL_SEED, held_out_counts


def agree_steps(req: WorkerRequest, warmup: list[float], comm: torch.device) -> int:
    """Rank 0 sizes the timed window from warmup speed; one broadcast so every rank agrees."""
    n = req.min_steps
    if warmup:
        # The first warmup step pays for lazy init (and compilation), and the next few still run
        # slower than steady state (oneDNN primitive caches, momentum buffers, page faults), so
        # the fastest one is the best predictor of a timed step.
        per_step = min(warmup[1:] or warmup)
        n = math.ceil(req.target_seconds / max(per_step, 1e-6))
    t = torch.tensor([min(max(n, req.min_steps), req.max_steps)], dtype=torch.int64, device=comm)
    dist.broadcast(t, src=0)
    return int(t.item())


def held_out_accuracy(spec, model: torch.nn.Module, rank: int, world_size: int, prepare, amp,
              comm: torch.device, limit: int | None = None) -> float:
    """The held-out accuracy over every rank's share of the held-out set (or the workload's own
    eval_fn), summed over ranks."""
    if spec.eval_fn is not None:
        t = torch.tensor([float(spec.eval_fn(model)), 1.0], dtype=torch.float64, device=comm)
    else:
        def context():
            stack = contextlib.ExitStack()
            stack.enter_context(torch.no_grad())
            stack.enter_context(amp())
            return stack
        # One held-out set for every seed: seeds vary initialisation and data order, and the
        # comparison between configurations is not diluted by the sampling of the test set.
        correct, total = held_out_counts(spec, model, EVAL_SEED, rank, world_size,
                                         prepare=prepare, context=context, limit=limit)
        t = torch.tensor([float(correct), float(total)], dtype=torch.float64, device=comm)
    dist.all_reduce(t)
    return float(t[0] / t[1]) if t[1] else float("nan")
