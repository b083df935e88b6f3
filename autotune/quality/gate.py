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
  not shown  neither, or a seed of the class failed (`failed`), or lost more than the tolerance
             plus SPIKE_SPREADS times the default's own spread (`spiked`): nothing is claimed,
             and the class is not recommended as if it kept accuracy
at the one-sided level 1 - alpha of the caller (GATE_ALPHA for one test; a look of new seeds
uses quality/looks.LOOK_ALPHA, so that a whole study's error stays at 5%).

**Paired.** A class's quality run and the default's of the same seed share the initial weights
(build_model(seed)), the data order (sample i of seed s) and the held-out examples (one set for
every seed), so their accuracies move together (correlation 0.57-0.99 measured,
benchmarks/accuracy/gate.py) and the spread of their difference is what decides: pairing cuts the
variance of the drop by the factor (1 - correlation). The unit is the seed, not the held-out
example: per-example agreement (McNemar) on one pair of trained models says nothing of how a
second seed would train, and its intervals missed the class's true drop far more often than 5%
(the benchmark measures both; docs/benchmarks.md, "The accuracy gate").

**Diverged.** A seed whose accuracy falls DIVERGED_DROP_PP or more below the default's diverged:
the class is beyond whatever its other seeds say. A seed that gave no number at all is a failed
seed: the class is not shown at best (it is never averaged away).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from ..result import StrEnum

GATE_ALPHA = 0.05
# One seed's drop this large is a class that diverged on it (a loss spike, a batch too large for
# its learning rate), not noise: every tolerance a user sets is far below it.
DIVERGED_DROP_PP = 20.0
# The worst seed is judged too (issue 60): a seed whose paired drop passes the tolerance by more
# than SPIKE_SPREADS times the default's own seed-to-seed spread lost more than any seed of the
# default's math plausibly does, and the class is not shown, whatever its mean. Measured
# (benchmarks/accuracy/gate.py, "spiky" and "bf16" arms): at 5 spreads a class exactly at the
# tolerance with the built-in cnn's spreads is called spiked on fewer than 1% of its seeds, while
# a seed losing 10 pp or more is caught at every spread the built-in workloads measured (<= 1.1 pp).
SPIKE_SPREADS = 5.0
# The finest step of an accuracy on the built-in workloads' 2048 held-out examples, in points: a
# spread is never taken below it (identical drops are not a spread of zero).
RESOLUTION_PP = 100.0 / 2048


def t_quantile(p: float, df: float) -> float:
    """Student t's p-quantile (0.5 < p < 1) at `df` degrees of freedom; a fractional df (Welch)
    rounds down, the cautious side. Exact for every whole df (the closed form of the t
    distribution function for whole df, inverted by bisection), not the normal's above 30."""
    return _t_quantile(round(p, 12), max(1, int(math.floor(df))))


def t95(df: float) -> float:
    """One-sided 95% Student t quantile."""
    return t_quantile(0.95, df)


@functools.lru_cache(maxsize=4096)
def _t_quantile(p: float, df: int) -> float:
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def _t_cdf(t: float, df: int) -> float:
    """P(T <= t), t >= 0, whole df (Abramowitz and Stegun 26.7.3-4)."""
    theta = math.atan(t / math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2:
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        a = 2 / math.pi * (theta + s * math.cos(theta) * total)
    else:
        term, total = 1.0, 1.0
        for k in range(1, df // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        a = s * total
    return 0.5 + a / 2


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
    drop in points, its standard error and degrees of freedom, and the bounds they give, at the
    one-sided level 1 - `alpha`; the seeds that failed on either side, and the worst seed."""
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
    alpha: float = GATE_ALPHA
    # (seed, why) of the class's runs that gave no quality where the default's trained: each
    # counts against the class (intention to treat), never as a seed not run
    failed: tuple[tuple[int, str], ...] = ()
    # (seed, why) of the default's runs that gave none: those pairs are left out, and named
    default_failed: tuple[tuple[int, str], ...] = ()
    spread_pp: float | None = None     # the default's own seed-to-seed sd (points)
    spike_limit_pp: float = math.inf   # a seed's drop past this is a spike (SPIKE_SPREADS)
    spiked: tuple[tuple[int, float], ...] = ()   # (seed, drop) past it, the worst first
    look: int = 0     # the block of seeds it was decided on: 0 the search's, 1.. a look's

    @property
    def quantile(self) -> float:
        return t_quantile(1.0 - self.alpha, self.df)

    @property
    def upper_pp(self) -> float:
        """One-sided (1 - alpha) upper bound of the drop."""
        return self.drop_pp + self.quantile * self.se_pp if math.isfinite(self.se_pp) else math.inf

    @property
    def lower_pp(self) -> float:
        return self.drop_pp - self.quantile * self.se_pp if math.isfinite(self.se_pp) \
            else -math.inf

    @property
    def answer(self) -> Shown:
        if self.diverged or self.lower_pp > self.tolerance_pp:
            return Shown.BEYOND
        if self.failed or self.spiked:
            return Shown.NOT_SHOWN
        return Shown.WITHIN if self.upper_pp <= self.tolerance_pp else Shown.NOT_SHOWN

    @property
    def lost_a_seed(self) -> bool:
        """A seed failed, diverged or spiked: any one makes the class not shown at best, and no
        number of further seeds can change that."""
        return bool(self.failed or self.diverged or self.spiked)

    @property
    def worst(self) -> tuple[int, float] | None:
        """(seed, drop) of the seed that lost the most, when seeds are paired."""
        pairs = list(zip(self.seeds, self.drops_pp))
        return max(pairs, key=lambda p: p[1]) if pairs else None

    @property
    def margin_pp(self) -> float:
        """upper bound - tolerance, <= 0 exactly when shown within (the sampler's constraint;
        the drop itself where no bound exists); a diverged, failed or spiked class is at least 1
        beyond (it may not lead)."""
        upper = self.upper_pp if math.isfinite(self.upper_pp) else \
            (self.drop_pp if math.isfinite(self.drop_pp) else 0.0) + 1.0
        margin = upper - self.tolerance_pp
        return max(margin, 1.0) if self.lost_a_seed else margin

    def describe(self) -> str:
        """The verdict in words, as every place that states it says it."""
        return claim_words(self)


def claim_words(b: DropBound) -> str:
    """'within 1 pp (95% upper bound of the drop 0.62 pp, 6 paired seeds; worst seed 4 lost
    1.10 pp)', 'not shown within 1 pp (drop 0.40 pp, 95% upper bound 1.71 pp, 3 paired seeds)',
    'not shown within 1 pp: failed on seed 2 (crash: exit 1) ...' or 'beyond 1 pp (drop 5.20 pp,
    95% lower bound 3.10 pp, 3 paired seeds)': the one wording of a verdict (trial lines,
    summary, report, export header and dashboard)."""
    tol = f"{b.tolerance_pp:g} pp"
    level = f"{100 * (1 - b.alpha):g}%"
    basis = (f"{b.n} paired seed{'s' if b.n != 1 else ''}" if b.paired else
             f"one run against the default's {b.n} seed{'s' if b.n != 1 else ''}")
    tail = "".join(f"; the default's seed {s} failed ({why}): its pair left out"
                   for s, why in b.default_failed)
    if b.diverged:
        which = ", ".join(str(s) for s in b.diverged)
        return (f"beyond {tol}: seed{'s' if len(b.diverged) > 1 else ''} {which} diverged "
                f"(drop up to {max(b.drops_pp, default=b.drop_pp):.1f} pp, {basis}){tail}")
    answer = b.answer
    if answer == Shown.BEYOND:
        return (f"beyond {tol} (drop {b.drop_pp:.2f} pp, {level} lower bound {b.lower_pp:.2f} pp, "
                f"{basis}){tail}")
    if b.failed:
        s, why = b.failed[0]
        more = f" and {len(b.failed) - 1} more" if len(b.failed) > 1 else ""
        rest = f"; drop {b.drop_pp:.2f} pp on the other {basis}" if b.n else ""
        return f"not shown within {tol}: failed on seed {s} ({why}){more}{rest}{tail}"
    if b.spiked:
        s, d = b.spiked[0]
        return (f"not shown within {tol}: seed {s} lost {d:.2f} pp, past the tolerance by more "
                f"than {SPIKE_SPREADS:g}x the default's seed-to-seed spread (limit "
                f"{b.spike_limit_pp:.2f} pp; mean drop {b.drop_pp:.2f} pp, {basis}){tail}")
    if not math.isfinite(b.upper_pp):
        return (f"not shown within {tol} (drop {b.drop_pp:.2f} pp on {basis}: a bound needs 2 or "
                f"more){tail}")
    worst = "" if not (b.worst and b.n > 1) else (
        f"; worst seed {b.worst[0]} lost {b.worst[1]:.2f} pp" if b.worst[1] >= 0 else
        f"; no seed lost accuracy (the least gain {-b.worst[1]:.2f} pp, seed {b.worst[0]})")
    if answer == Shown.WITHIN:
        return f"within {tol} ({level} upper bound of the drop {b.upper_pp:.2f} pp, {basis}{worst}){tail}"
    return (f"not shown within {tol} (drop {b.drop_pp:.2f} pp, {level} upper bound "
            f"{b.upper_pp:.2f} pp, {basis}{worst}){tail}")


def showable(b: DropBound) -> bool:
    """Could enough paired seeds at some spread show `b`'s class within the tolerance? Not when
    its drop is at or beyond it, a seed failed, diverged or spiked, or it has no paired spread
    (fewer than 2 paired seeds, or a single unpaired run)."""
    return b.paired and b.n >= 2 and not b.lost_a_seed and b.drop_pp < b.tolerance_pp


def pairs_to_show(b: DropBound, most: int = 30, *, alpha: float | None = None,
                  inflate: float = 1.0, least_sd: float = 0.0) -> int | None:
    """How many paired seeds in all would show `b`'s class within the tolerance at the level
    `alpha` (b's own when None) if more seeds measured the same mean drop and a spread `inflate`
    times the one measured, `least_sd` at least (a planning figure, not a promise); None when no number up to `most`
    would: the drop itself is at or beyond the tolerance, a seed failed or spiked, or there is no
    spread to plan with."""
    if not showable(b):
        return None
    a = b.alpha if alpha is None else alpha
    if a == b.alpha and inflate == 1.0 and b.answer == Shown.WITHIN:
        return b.n
    sd = max(b.se_pp * math.sqrt(b.n) * inflate, least_sd)
    return next((n for n in range(2, most + 1)
                 if b.drop_pp + t_quantile(1 - a, n - 1) * sd / math.sqrt(n) <= b.tolerance_pp),
                None)


def paired(default: dict[int, float], candidate: dict[int, float], tolerance_pp: float, *,
           scale: float = 100.0, lower_is_better: bool = False,
           seeds: tuple[int, ...] | None = None, alpha: float = GATE_ALPHA,
           failed: dict[int, str] | None = None, default_failed: dict[int, str] | None = None,
           spread_pp: float | None = None,
           resolution_pp: float = RESOLUTION_PP) -> DropBound:
    """The paired test of `candidate` against `default`, each {seed: quality} (fractions: accuracy
    0.91; `scale` makes points of them), on the seeds both have (of `seeds`, when given), at the
    one-sided level 1 - `alpha`. A metric where lower is better (a loss) counts a rise as the
    drop. `failed` / `default_failed`: {seed: why} of runs that gave no quality; a candidate's
    failure (or a quality that is not a number) counts against it where the default's same seed
    did not fail; the default's failure leaves its pair out. `spread_pp`: the default's own
    seed-to-seed standard deviation in points (its runs here when None), floored at
    `resolution_pp`, which also floors the drops' spread."""
    def chosen(s: int) -> bool:
        return seeds is None or s in seeds
    d_bad = {s: w for s, w in (default_failed or {}).items() if chosen(s)}
    c_bad = {s: w for s, w in (failed or {}).items() if chosen(s) and s not in d_bad}
    for s in sorted(set(default) & set(candidate)):
        if chosen(s) and not math.isfinite(default[s]):
            d_bad.setdefault(s, "its quality is not a number")
        elif chosen(s) and not math.isfinite(candidate[s]):
            c_bad.setdefault(s, "its quality is not a number")
    both = tuple(s for s in sorted(set(default) & set(candidate))
                 if chosen(s) and s not in d_bad and s not in c_bad)
    sign = -1.0 if lower_is_better else 1.0
    drops = [sign * (default[s] - candidate[s]) * scale for s in both]
    diverged = tuple(s for s, d in zip(both, drops) if d >= DIVERGED_DROP_PP)
    a = [default[s] * scale for s in both]
    b = [candidate[s] * scale for s in both]
    n = len(both)
    spread = max(spread_pp if spread_pp is not None else _sd(a), resolution_pp)
    limit = tolerance_pp + SPIKE_SPREADS * spread
    return DropBound(
        drop_pp=sum(drops) / n if n else float("nan"),
        se_pp=max(_sd(drops), resolution_pp) / math.sqrt(n) if n >= 2 else math.inf,
        df=max(1, n - 1), n=n, tolerance_pp=tolerance_pp, seeds=both,
        drops_pp=tuple(min(d, 100.0) for d in drops), alpha=alpha,
        correlation=correlation(a, b),
        se_unpaired_pp=math.sqrt(_sd(a) ** 2 / n + _sd(b) ** 2 / n) if n >= 2 else None,
        diverged=diverged, failed=tuple(sorted(c_bad.items())),
        default_failed=tuple(sorted(d_bad.items())), spread_pp=spread, spike_limit_pp=limit,
        spiked=tuple(sorted(((s, d) for s, d in zip(both, drops)
                             if d > limit and s not in diverged), key=lambda p: -p[1])))


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
