"""Quality evidence: the pure arithmetic behind "is this configuration as accurate as the default?"

Everything here is a function of numbers measured elsewhere (seeded quality runs), so it is tested
with literal values. The rules:

- **Math classes.** Configurations that train identically share one quality measurement. The
  global batch, its learning-rate rule, precision, torch.compile, IPEX and channels_last change
  the numbers; with BatchNorm, so does the batch each BatchNorm layer sees (DDP keeps BatchNorm
  statistics per rank, and gradient accumulation splits them further). Ranks, threads, binding,
  allocator and OpenMP runtime do not: at an equal global batch the all-reduced gradient is the
  mean over the same samples.
- **The gate.** A class is rejected only when its quality loss exceeds the tolerance by more than
  the noise: with the default's seeds d and the candidate's seeds c (each >= 2),
  reject iff mean(d) - mean(c) - tol > t(0.95, Welch df) * sqrt(s_d^2/n_d + s_c^2/n_c),
  a one-sided Welch t-test of "the drop is larger than the tolerance" at the 5% level. A neutral
  change is then falsely rejected well under 5% of the time, and a change that loses several
  times the noise is rejected almost always (benchmarks/accuracy_gate.py measures both).
- **Learning rate.** A global batch k times the reference's gets k*lr (linear, Goyal et al. 2017,
  with a warm-up), sqrt(k)*lr (Krizhevsky 2014; Hoffer et al. 2017) or lr (none).
- **Gradient noise scale** (McCandlish et al. 2018, appendix A): from squared gradient norms at a
  small batch b and a big batch B of the same step, |G|^2 ~ (B|G_B|^2 - b|G_b|^2)/(B - b) and
  tr(S) ~ (|G_b|^2 - |G_B|^2)/(1/b - 1/B); B_noise = tr(S)/|G|^2. Averages of the two estimates
  over several steps are divided, not the ratios averaged (their advice: the ratio is biased).
- **Goodput** (Pollux, Qiao et al. OSDI 2021): throughput x statistical efficiency, where a
  global batch M trained from a reference M0 has efficiency (B_noise + M0)/(B_noise + M): the
  fraction of the reference's progress per sample that a sample at batch M still buys.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from ..config import LR_RULES, REFERENCE_GLOBAL_BATCH, Config
from ..errors import ConfigError

GATE_ALPHA = 0.05

# One-sided 95% quantiles of Student's t by degrees of freedom (1..30); beyond: the normal's.
_T95 = (6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782,
        1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711,
        1.708, 1.706, 1.703, 1.701, 1.699, 1.697)


def t95(df: float) -> float:
    """One-sided 95% Student t quantile; fractional df (Welch) rounds down, the cautious side."""
    if df < 1:
        return _T95[0]
    d = int(math.floor(df))
    return _T95[d - 1] if d <= len(_T95) else 1.645


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


# ---- seeds and the gate --------------------------------------------------------------------------

@dataclass(frozen=True)
class Sample:
    """Quality of one math class over seeds (one value per seed)."""
    values: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values) if self.values else float("nan")

    @property
    def sd(self) -> float:
        """Sample standard deviation (n - 1); 0 for fewer than 2 values."""
        if len(self.values) < 2:
            return 0.0
        m = self.mean
        return math.sqrt(sum((v - m) ** 2 for v in self.values) / (len(self.values) - 1))

    def describe(self, scale: float = 1.0) -> str:
        return f"{self.mean * scale:.3f} ± {self.sd * scale:.3f}"


@dataclass(frozen=True, kw_only=True)
class Verdict:
    reject: bool
    drop_pp: float          # mean(default) - mean(candidate), percentage points
    noise_pp: float         # t * standard error of that difference, percentage points
    tolerance_pp: float
    df: float

    @property
    def margin_pp(self) -> float:
        """> 0 exactly when rejected: how far the drop is beyond tolerance plus noise."""
        return self.drop_pp - self.tolerance_pp - self.noise_pp

    def describe(self) -> str:
        verb = "exceeds" if self.reject else "within"
        return (f"drop {self.drop_pp:+.2f} pp, {verb} {self.tolerance_pp:g} pp "
                f"+ noise {self.noise_pp:.2f} pp")


def gate(default: Sample, candidate: Sample, tolerance_pp: float, *, scale: float = 100.0,
         lower_is_better: bool = False) -> Verdict:
    """One-sided Welch test of "the candidate loses more than `tolerance_pp`" (see the module doc).

    Values are fractions (accuracy 0.91) and `scale` turns them into points (100); a metric where
    lower is better (a loss) counts a rise as the drop."""
    if default.n < 1 or candidate.n < 1:
        raise ValueError("the gate needs at least one value on each side")
    sign = -1.0 if lower_is_better else 1.0
    drop = sign * (default.mean - candidate.mean) * scale
    var_d = (default.sd * scale) ** 2 / default.n
    var_c = (candidate.sd * scale) ** 2 / candidate.n
    se = math.sqrt(var_d + var_c)
    df = welch_df(var_d, var_c, default.n, candidate.n)
    noise = t95(df) * se
    reject = drop > tolerance_pp + noise
    return Verdict(reject=reject, drop_pp=drop, noise_pp=noise, tolerance_pp=tolerance_pp, df=df)


def single_run_gate(default: Sample, value: float, tolerance_pp: float, *,
                    scale: float = 100.0) -> Verdict:
    """The gate for a configuration measured once (a script's accuracy, reported with its speed)
    against the default launch's seeds: the one run is as noisy as one of the default's, so the
    noise is t x sd x sqrt(1/n + 1), a prediction interval for one new run."""
    if default.n < 2:
        raise ValueError("the single-run gate needs the default launch's spread: 2 seeds or more")
    drop = (default.mean - value) * scale
    df = default.n - 1
    noise = t95(df) * default.sd * scale * math.sqrt(1 / default.n + 1)
    return Verdict(reject=drop > tolerance_pp + noise, drop_pp=drop, noise_pp=noise,
                   tolerance_pp=tolerance_pp, df=df)


def welch_df(var_a: float, var_b: float, n_a: int, n_b: int) -> float:
    """Welch-Satterthwaite degrees of freedom (var_* are the squared standard errors)."""
    if n_a < 2 and n_b < 2:
        return 1.0
    num = (var_a + var_b) ** 2
    den = (var_a ** 2 / (n_a - 1) if n_a > 1 else 0.0) + (var_b ** 2 / (n_b - 1) if n_b > 1 else 0.0)
    if den <= 0:
        return float(max(1, n_a + n_b - 2))
    return num / den


# ---- gradient noise scale and goodput -----------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class NoiseScale:
    """Gradient noise scale estimate; `b_noise` is None when the estimate is not usable."""
    grad_sq: float          # |G|^2 estimate (averaged over probes)
    trace: float            # tr(Sigma) estimate
    small: int
    big: int
    probes: int

    @property
    def b_noise(self) -> float | None:
        if self.grad_sq <= 0 or self.trace <= 0:
            return None   # the estimators are unbiased but noisy: a negative one says "unknown"
        return self.trace / self.grad_sq


def noise_scale(small_sq: Iterable[float], big_sq: Iterable[float], small: int,
                big: int) -> NoiseScale:
    """McCandlish et al.'s two-batch estimator from squared gradient norms |G_b|^2 (one per small
    batch, any number per probe step) and |G_B|^2 (one per probe step)."""
    if not 0 < small < big:
        raise ValueError(f"need 0 < small ({small}) < big ({big})")
    s, g = list(small_sq), list(big_sq)
    if not s or not g:
        raise ValueError("need at least one small and one big squared norm")
    ms, mb = sum(s) / len(s), sum(g) / len(g)
    grad_sq = (big * mb - small * ms) / (big - small)
    trace = (ms - mb) / (1.0 / small - 1.0 / big)
    return NoiseScale(grad_sq=grad_sq, trace=trace, small=small, big=big, probes=len(g))


def efficiency(b_noise: float | None, batch: int, reference: int) -> float:
    """Pollux's statistical efficiency of global batch `batch` relative to `reference`."""
    if b_noise is None:
        return 1.0 if batch == reference else float("nan")
    return (b_noise + reference) / (b_noise + batch)


def goodput(throughput: float, b_noise: float | None, batch: int, reference: int) -> float:
    """Samples per second that count, in units of the reference batch's progress per sample."""
    return throughput * efficiency(b_noise, batch, reference)


# ---- time to accuracy ---------------------------------------------------------------------------

def samples_to_target(curves: Sequence[Sequence[tuple[int, float]]], target: float,
                      *, lower_is_better: bool = False) -> int | None:
    """Training samples after which the seeds' mean learning curve first reaches `target`,
    linearly interpolated between checkpoints (MLPerf's time-to-train, in samples). Curves are
    [(samples, quality)] at the same checkpoints; None when the mean never gets there."""
    if not curves:
        return None
    n = min(len(c) for c in curves)
    points = [(curves[0][i][0], sum(c[i][1] for c in curves) / len(curves)) for i in range(n)]
    sign = -1.0 if lower_is_better else 1.0
    prev: tuple[int, float] | None = None
    for x, y in points:
        if sign * y >= sign * target:
            if prev is None or sign * prev[1] >= sign * target:
                return int(x)
            (x0, y0) = prev
            frac = (target - y0) / (y - y0) if y != y0 else 1.0
            return int(round(x0 + frac * (x - x0)))
        prev = (x, y)
    return None
