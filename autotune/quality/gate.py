"""The accuracy gate: the pure arithmetic behind "does this math class train as well as the
default launch's?", a function of numbers measured elsewhere (seeded quality runs), tested with
literal values.

**Shown, not presumed.** A class is accepted only when its runs show that it loses at most the
tolerance: a non-inferiority test, the one half of the two one-sided tests (TOST) that an "it
loses no more than" claim needs. With the per-seed drops d_s = default_s - candidate_s (in
percentage points) over n paired seeds,
  upper = mean(d) + t(0.95, n-1) * sd(d) / sqrt(n)     the one-sided 95% upper bound of the drop
  lower = mean(d) - t(0.95, n-1) * sd(d) / sqrt(n)     ... and its lower bound
and the answer has three values, not two:
  within     upper <= tolerance: shown to lose at most the tolerance
  beyond     lower > tolerance, or a seed diverged: shown to lose more
  not shown  neither: the runs cannot tell; nothing is claimed, and the class is not
             recommended as if it kept accuracy
A class that truly loses more than the tolerance is accepted in at most 5% of judgements.

**Paired.** A class's quality run and the default's of the same seed share the initial weights
(build_model(seed)), the data order (sample i of seed s) and the held-out examples (one set for
every seed), so their accuracies move together (correlation 0.57-0.99 measured,
benchmarks/accuracy/gate.py) and the spread of their difference is what decides: pairing cuts the
variance of the drop by the factor (1 - correlation). The unit is the seed, not the held-out
example: per-example agreement (McNemar) on one pair of trained models says nothing of how a
second seed would train, and its intervals missed the class's true drop far more often than 5%
(the benchmark measures both; docs/benchmarks.md, "The accuracy gate").

**Diverged.** A seed whose accuracy falls DIVERGED_DROP_PP or more below the default's, or is
not a number, diverged: the class is beyond whatever its other seeds say (one such seed
already makes the bound wide; this says why in words).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..result import StrEnum

GATE_ALPHA = 0.05
# One seed's drop this large is a class that diverged on it (a loss spike, a batch too large for
# its learning rate), not noise: every tolerance a user sets is far below it.
DIVERGED_DROP_PP = 20.0

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


class Shown(StrEnum):
    """What a class's runs show of its drop against the tolerance."""
    WITHIN = "within"
    BEYOND = "beyond"
    NOT_SHOWN = "not shown"


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
        return _sd(self.values)

    def describe(self, scale: float = 1.0) -> str:
        return f"{self.mean * scale:.3f} ± {self.sd * scale:.3f}"


@dataclass(frozen=True, kw_only=True)
class DropBound:
    """The test's numbers for one class against the default (what a verdict carries): the mean
    drop in points, its standard error and degrees of freedom, and the bounds they give."""
    drop_pp: float                # mean(default) - mean(class), percentage points
    se_pp: float                  # its standard error (inf: no spread to bound it with)
    df: int
    n: int                        # paired seeds (a single run: the default's seeds)
    tolerance_pp: float
    paired: bool = True           # False: one run against the default's seeds
    seeds: tuple[int, ...] = ()
    drops_pp: tuple[float, ...] = ()   # per paired seed
    correlation: float | None = None   # of the two sides' per-seed qualities (n >= 3)
    se_unpaired_pp: float | None = None   # what an unpaired (Welch) test would have used
    diverged: tuple[int, ...] = ()

    @property
    def upper_pp(self) -> float:
        """One-sided 95% upper bound of the drop."""
        return self.drop_pp + t95(self.df) * self.se_pp if math.isfinite(self.se_pp) else math.inf

    @property
    def lower_pp(self) -> float:
        return self.drop_pp - t95(self.df) * self.se_pp if math.isfinite(self.se_pp) else -math.inf

    @property
    def answer(self) -> Shown:
        if self.diverged or self.lower_pp > self.tolerance_pp:
            return Shown.BEYOND
        return Shown.WITHIN if self.upper_pp <= self.tolerance_pp else Shown.NOT_SHOWN

    @property
    def margin_pp(self) -> float:
        """upper bound - tolerance, <= 0 exactly when shown within (the sampler's constraint;
        the drop itself where no bound exists); a diverged class is at least 1 beyond."""
        upper = self.upper_pp if math.isfinite(self.upper_pp) else self.drop_pp + 1.0
        margin = upper - self.tolerance_pp
        return max(margin, 1.0) if self.diverged else margin

    def describe(self) -> str:
        """The verdict in words, as every place that states it says it."""
        return claim_words(self)


def claim_words(b: DropBound) -> str:
    """'within 1 pp (95% upper bound of the drop 0.62 pp, 6 paired seeds)', 'not shown within
    1 pp (drop 0.40 pp, 95% upper bound 1.71 pp, 3 paired seeds)' or 'beyond 1 pp (drop 5.20 pp,
    95% lower bound 3.10 pp, 3 paired seeds)': the one wording of a verdict (trial lines,
    summary, report, export header and dashboard)."""
    tol = f"{b.tolerance_pp:g} pp"
    basis = (f"{b.n} paired seed{'s' if b.n != 1 else ''}" if b.paired else
             f"one run against the default's {b.n} seed{'s' if b.n != 1 else ''}")
    if b.diverged:
        which = ", ".join(str(s) for s in b.diverged)
        return (f"beyond {tol}: seed{'s' if len(b.diverged) > 1 else ''} {which} diverged "
                f"(drop up to {max(b.drops_pp, default=b.drop_pp):.1f} pp, {basis})")
    if not math.isfinite(b.upper_pp):
        return f"not shown within {tol} (drop {b.drop_pp:.2f} pp on {basis}: a bound needs 2 or more)"
    answer = b.answer
    if answer == Shown.WITHIN:
        return f"within {tol} (95% upper bound of the drop {b.upper_pp:.2f} pp, {basis})"
    if answer == Shown.BEYOND:
        return (f"beyond {tol} (drop {b.drop_pp:.2f} pp, 95% lower bound {b.lower_pp:.2f} pp, "
                f"{basis})")
    return (f"not shown within {tol} (drop {b.drop_pp:.2f} pp, 95% upper bound "
            f"{b.upper_pp:.2f} pp, {basis})")


def pairs_to_show(b: DropBound, most: int = 30) -> int | None:
    """How many paired seeds in all would show `b`'s class within the tolerance if more seeds
    measured the same mean drop and spread (a planning figure, not a promise); None when no
    number up to `most` would: the drop itself is at or beyond the tolerance, or there is no
    spread to plan with."""
    if not b.paired or b.n < 2 or b.diverged or b.drop_pp >= b.tolerance_pp:
        return None
    if b.answer == Shown.WITHIN:
        return b.n
    sd = b.se_pp * math.sqrt(b.n)
    return next((n for n in range(b.n + 1, most + 1)
                 if b.drop_pp + t95(n - 1) * sd / math.sqrt(n) <= b.tolerance_pp), None)


def paired(default: dict[int, float], candidate: dict[int, float], tolerance_pp: float, *,
           scale: float = 100.0, lower_is_better: bool = False,
           seeds: tuple[int, ...] | None = None) -> DropBound:
    """The paired test of `candidate` against `default`, each {seed: quality} (fractions: accuracy
    0.91; `scale` makes points of them), on the seeds both have (of `seeds`, when given). A
    metric where lower is better (a loss) counts a rise as the drop."""
    both = tuple(s for s in sorted(set(default) & set(candidate)) if seeds is None or s in seeds)
    sign = -1.0 if lower_is_better else 1.0
    drops, diverged = [], []
    for s in both:
        d, c = default[s], candidate[s]
        drop = sign * (d - c) * scale if math.isfinite(c) and math.isfinite(d) else math.inf
        if drop >= DIVERGED_DROP_PP:
            diverged.append(s)
            drop = min(drop, 100.0)
        drops.append(drop)
    a = [default[s] * scale for s in both]
    b = [candidate[s] * scale for s in both]
    n = len(both)
    finite = all(map(math.isfinite, a + b))
    return DropBound(
        drop_pp=sum(drops) / n if n else float("nan"),
        se_pp=_sd(drops) / math.sqrt(n) if n >= 2 else math.inf, df=max(1, n - 1), n=n,
        tolerance_pp=tolerance_pp, seeds=both, drops_pp=tuple(drops),
        correlation=correlation(a, b) if finite else None,
        se_unpaired_pp=math.sqrt(_sd(a) ** 2 / n + _sd(b) ** 2 / n) if n >= 2 and finite else None,
        diverged=tuple(diverged))


def single_run(default: Sample, value: float, tolerance_pp: float, *,
               scale: float = 100.0) -> DropBound:
    """A configuration measured once (a script's reported accuracy, with no seed to pair it by)
    against the default launch's seeds: its one run is as noisy as one new run of the default,
    so its bound is a prediction bound, t x sd x sqrt(1 + 1/n) above the drop. It rarely shows
    anything; runs of it on the default's seeds ({seed}) would be paired."""
    drop = (default.mean - value) * scale
    n = default.n
    finite = math.isfinite(value) and math.isfinite(default.mean)
    return DropBound(
        drop_pp=drop if finite else 100.0,
        se_pp=default.sd * scale * math.sqrt(1 + 1 / n) if n >= 2 else math.inf,
        df=max(1, n - 1), n=n, tolerance_pp=tolerance_pp, paired=False,
        diverged=(0,) if not finite or drop >= DIVERGED_DROP_PP else ())


def correlation(a: list[float], b: list[float]) -> float | None:
    """Pearson's r of two equal-length lists (None: fewer than 3 values, or one is constant)."""
    if len(a) < 3 or len(a) != len(b):
        return None
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    sab = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    saa = sum((x - ma) ** 2 for x in a)
    sbb = sum((y - mb) ** 2 for y in b)
    return sab / math.sqrt(saa * sbb) if saa > 0 and sbb > 0 else None


def welch_df(var_a: float, var_b: float, n_a: int, n_b: int) -> float:
    """Welch-Satterthwaite degrees of freedom (var_* are the squared standard errors); the
    quality-length benchmark's unpaired comparison uses it."""
    if n_a < 2 and n_b < 2:
        return 1.0
    num = (var_a + var_b) ** 2
    den = (var_a ** 2 / (n_a - 1) if n_a > 1 else 0.0) + (var_b ** 2 / (n_b - 1) if n_b > 1 else 0.0)
    if den <= 0:
        return float(max(1, n_a + n_b - 2))
    return num / den


def _sd(values) -> float:
    vals = list(values)
    if len(vals) < 2:
        return 0.0
    m = sum(vals) / len(vals)
    return math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))
