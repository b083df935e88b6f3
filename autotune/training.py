"""The training arithmetic every floor shares (ground floor, beside config.py's LR_RULES and
reference batch): how a global batch is split over ranks, how the learning rate scales with it,
and how long a quality run trains.

- **Batch split.** The global batch is the invariant: more ranks take smaller shares of the same
  samples, and a micro-batch below a rank's share is reached by gradient accumulation. The plan
  checks the split (plan/feasible.py) and each rank trains with it (worker/train.py).
- **Learning rate.** A global batch k times the reference's gets k*lr (linear, Goyal et al. 2017,
  with a warm-up), sqrt(k)*lr (Krizhevsky 2014; Hoffer et al. 2017) or lr (none).
- **Quality sample count.** How long a search's seeded quality runs train (below).
"""
from __future__ import annotations

import math

from .config import LR_RULES
from .errors import ConfigError

# What a search's seeded quality runs train on (in global training samples), for the built-in
# workloads and a user's entry point that names no `quality_samples` of its own
# (`--quality-samples` overrides it). Chosen from measurements on the built-in cnn
# (docs/benchmarks.md, "Quality runs and the accuracy gate"): at 4096 one seed's accuracy varied
# by 4 points; at 16384 the seeds agree to about half a point while the task is still far from
# saturated, and three seeds still fit in a 10-minute search.
QUALITY_SAMPLES = 16384
# The length a launch plan carries when its caller names none: the exports and `--dry-run` plans
# build throughput launches, which never train a quality run, and every search passes its own
# length (QUALITY_SAMPLES or the workload's).
PLAN_FALLBACK_SAMPLES = 4096
# The most seeds a quality class is judged on (--quality-seeds; a stored noise floor or setting
# claiming more is not one a search wrote, study/bounded.py).
MAX_QUALITY_SEEDS = 64


def split_batch(global_batch: int, nproc: int, micro_batch: int | None = None) -> tuple[int, int]:
    """(per-rank micro-batch, accumulation steps) so that nproc x micro x accum == global_batch.

    The global batch is the invariant: more ranks take smaller shares of the same samples. A
    micro-batch (memory, cache fit) below the rank's share is reached by gradient accumulation."""
    if global_batch % nproc:
        raise ConfigError(f"global_batch={global_batch} cannot be split over nproc={nproc} ranks "
                          f"(not a multiple; e.g. global_batch={nproc * max(1, global_batch // nproc)})")
    share = global_batch // nproc
    if micro_batch is None:
        return share, 1
    if micro_batch > share or share % micro_batch:
        raise ConfigError(f"batch_size={micro_batch} must divide each rank's share of the global "
                          f"batch ({global_batch} / {nproc} ranks = {share})")
    return micro_batch, share // micro_batch


def lr_scale(rule: str, global_batch: int, reference_batch: int) -> float:
    """Factor on the reference learning rate for a global batch (rule: linear, sqrt, none)."""
    if rule not in LR_RULES:
        raise ConfigError(f"lr_rule={rule!r} is not valid; choose one of: {', '.join(LR_RULES)}")
    if global_batch < 1 or reference_batch < 1:
        raise ConfigError(f"global batch {global_batch} / reference {reference_batch}: "
                          "must be positive")
    k = global_batch / reference_batch
    return {"linear": k, "sqrt": math.sqrt(k), "none": 1.0}[rule]


def lr_at(step: int, *, base_lr: float, scale: float, warmup_steps: int) -> float:
    """The learning rate of optimizer step `step` (0-based): Goyal et al.'s gradual warm-up from
    the reference rate to the scaled one over `warmup_steps`, then constant. A scaled-down rate
    (scale <= 1) needs no warm-up and starts at its value."""
    target = base_lr * scale
    if scale <= 1.0 or warmup_steps <= 0 or step >= warmup_steps:
        return target
    return base_lr + (target - base_lr) * (step + 1) / warmup_steps
