"""Gradient noise scale, goodput and time to accuracy: pure arithmetic on measured numbers.

- **Gradient noise scale** (McCandlish et al. 2018, appendix A): from squared gradient norms at a
  small batch b and a big batch B of the same step, |G|^2 ~ (B|G_B|^2 - b|G_b|^2)/(B - b) and
  tr(S) ~ (|G_b|^2 - |G_B|^2)/(1/b - 1/B); B_noise = tr(S)/|G|^2. Averages of the two estimates
  over several steps are divided, not the ratios averaged (their advice: the ratio is biased).
- **Goodput** (Pollux, Qiao et al. OSDI 2021): throughput x statistical efficiency, where a
  global batch M trained from a reference M0 has efficiency (B_noise + M0)/(B_noise + M): the
  fraction of the reference's progress per sample that a sample at batch M still buys.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence


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


@dataclass(frozen=True, kw_only=True)
class Predicted:
    """A global batch's goodput predicted before any quality run of it (Pollux's efficiency at
    the default's measured noise scale)."""
    throughput: float
    efficiency: float
    goodput: float
    batch: int
    b_noise: float

    def words(self, default_throughput: float) -> str:
        return (f"not worth quality runs: predicted goodput {self.goodput:.0f} samples/s, below "
                f"the default launch's {default_throughput:.0f} (statistical efficiency "
                f"{self.efficiency:.2f} at global batch {self.batch}, gradient noise scale "
                f"~{self.b_noise:.0f})")


def predicted_goodput(throughput: float, b_noise: float | None, batch: int,
                      reference: int) -> Predicted | None:
    """The goodput of `batch` at `throughput`, predicted from `b_noise` (None: no usable noise
    scale to predict with)."""
    if not b_noise or b_noise <= 0:
        return None
    eff = efficiency(b_noise, batch, reference)
    return Predicted(throughput=throughput, efficiency=eff, goodput=throughput * eff,
                     batch=batch, b_noise=b_noise)


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
