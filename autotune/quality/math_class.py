"""Which configurations train alike, and the training arithmetic that decides it.

- **Math classes.** Configurations that train identically share one quality measurement. The
  global batch, its learning-rate rule, precision, torch.compile, IPEX and channels_last change
  the numbers; with BatchNorm, so does the batch each BatchNorm layer sees (DDP keeps BatchNorm
  statistics per rank, and gradient accumulation splits them further). Ranks, threads, binding,
  allocator and OpenMP runtime do not: at an equal global batch the all-reduced gradient is the
  mean over the same samples.
- **Learning rate.** A global batch k times the reference's gets k*lr (linear, Goyal et al. 2017,
  with a warm-up), sqrt(k)*lr (Krizhevsky 2014; Hoffer et al. 2017) or lr (none).
"""
from __future__ import annotations

import math

from ..config import LR_RULES, REFERENCE_GLOBAL_BATCH, Config
from ..errors import ConfigError


def math_class(config: Config, *, batchnorm: bool,
               reference_batch: int = REFERENCE_GLOBAL_BATCH) -> str:
    """The part of a configuration that decides what training computes (see the module doc);
    configurations with equal classes share one seeded quality measurement."""
    parts = [f"global_batch={config.global_batch}", f"precision={config.precision}"]
    if config.global_batch != reference_batch:
        parts.append(f"lr_rule={config.lr_rule}")
    parts += [f"{k}={v}" for k, v in (("compile", config.compile), ("ipex", config.ipex),
                                      ("channels_last", config.channels_last))
              if v != getattr(Config(), k)]
    if config.data_pipeline:   # augmented batches (crop/flip): other data, other quality
        parts.append("data_pipeline=augmented")
    if batchnorm:   # statistics over each forward pass's batch, per rank (DDP's default)
        parts.append(f"bn_batch={config.micro_batch}")
    return ",".join(parts)


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
