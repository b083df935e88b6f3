"""The accuracy gate: the pure arithmetic behind "is this configuration as accurate as the
default?", a function of numbers measured elsewhere (seeded quality runs), tested with literal
values.

A class is rejected only when its quality loss exceeds the tolerance by more than the noise: with
the default's seeds d and the candidate's seeds c (each >= 2),
  reject iff mean(d) - mean(c) - tol > t(0.95, Welch df) * sqrt(s_d^2/n_d + s_c^2/n_c),
a one-sided Welch t-test of "the drop is larger than the tolerance" at the 5% level. A neutral
change is then falsely rejected well under 5% of the time, and a change that loses several times
the noise is rejected almost always (benchmarks/accuracy_gate.py measures both).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

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
class GateResult:
    """The Welch test's numbers for one comparison (what the typed verdict carries)."""
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
         lower_is_better: bool = False) -> GateResult:
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
    return GateResult(reject=reject, drop_pp=drop, noise_pp=noise, tolerance_pp=tolerance_pp, df=df)


def single_run_gate(default: Sample, value: float, tolerance_pp: float, *,
                    scale: float = 100.0) -> GateResult:
    """The gate for a configuration measured once (a script's accuracy, reported with its speed)
    against the default launch's seeds: the one run is as noisy as one of the default's, so the
    noise is t x sd x sqrt(1/n + 1), a prediction interval for one new run."""
    if default.n < 2:
        raise ValueError("the single-run gate needs the default launch's spread: 2 seeds or more")
    drop = (default.mean - value) * scale
    df = default.n - 1
    noise = t95(df) * default.sd * scale * math.sqrt(1 / default.n + 1)
    return GateResult(reject=drop > tolerance_pp + noise, drop_pp=drop, noise_pp=noise,
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
