"""Which configurations train alike (the batch split and learning-rate arithmetic behind it is
autotune/training.py's).

- **Math classes.** Configurations that train identically share one quality measurement. The
  global batch, its learning-rate rule, precision, IPEX and channels_last change the numbers;
  with BatchNorm, so does the batch each BatchNorm layer sees (DDP keeps BatchNorm statistics per
  rank, and gradient accumulation splits them further). Ranks, threads, binding, allocator,
  OpenMP runtime and a CPU rank's DataLoader workers (they make its own batches) do not: at an
  equal global batch the all-reduced gradient is the mean over the same samples.
- **torch.compile is the default's math** (issue 59). Inductor fuses and reorders the same
  operations (a sum's order, an fma for a multiply-add): rounding differs in the last bits, the
  recipe does not (no precision, batch or learning-rate change). Paired quality runs, compiled
  against eager at the same seeds, agree within the default's own seed-to-seed spread
  (benchmarks/accuracy/compile_same_math.py; docs/benchmarks.md). So a compiled launch shares its
  eager twin's class and quality runs, and its ceiling too (measure/split.py).
"""
from __future__ import annotations

from ..config import REFERENCE_GLOBAL_BATCH, Config

_DEFAULT = Config()   # frozen; built once (the search asks for a class many times a trial)


def math_class(config: Config, *, batchnorm: bool,
               reference_batch: int = REFERENCE_GLOBAL_BATCH) -> str:
    """The part of a configuration that decides what training computes (see the module doc);
    configurations with equal classes share one seeded quality measurement."""
    parts = [f"global_batch={config.global_batch}", f"precision={config.precision}"]
    if config.global_batch != reference_batch:
        parts.append(f"lr_rule={config.lr_rule}")
    parts += [f"{k}={v}" for k, v in (("ipex", config.ipex),
                                      ("channels_last", config.channels_last))
              if v != getattr(_DEFAULT, k)]
    if config.augmented_batches:   # crop/flip (GPU trials): other data, other quality
        parts.append("data_pipeline=augmented")
    if batchnorm:   # statistics over each forward pass's batch, per rank (DDP's default)
        parts.append(f"bn_batch={config.micro_batch}")
    return ",".join(parts)
