"""Statistics over what ranks measured. Pure: no processes, no clocks; tested with literal numbers.

Medians and IQRs rather than means and standard deviations: one step that hit a page-fault storm
or a scheduler hiccup should not move the number a search ranks configurations by.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from .compile_cost import launch_compile_cost
from .split import fixed_costs, split_of_report

if TYPE_CHECKING:
    from ..result import TrialResult


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default, R type 7)."""
    if not sorted_values:
        raise ValueError("quantile of no values")
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclass(frozen=True, kw_only=True)
class Quartiles:
    """The middle of a sample: its median and the quartiles around it."""
    median: float
    q1: float
    q3: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1


@dataclass(frozen=True, kw_only=True)
class Stats(Quartiles):
    n: int
    mean: float
    stdev: float                # sample standard deviation (n - 1); 0 for a single value
    min: float
    max: float

    @property
    def cv(self) -> float:
        """Coefficient of variation, stdev / mean (0 when the mean is 0)."""
        return self.stdev / self.mean if self.mean else 0.0

    @classmethod
    def of(cls, values: Sequence[float]) -> "Stats":
        xs = sorted(float(v) for v in values)
        if not xs:
            raise ValueError("Stats.of: no values")
        return cls(n=len(xs), median=quantile(xs, 0.5), q1=quantile(xs, 0.25),
                   q3=quantile(xs, 0.75),
                   mean=statistics.fmean(xs), stdev=statistics.stdev(xs) if len(xs) > 1 else 0.0,
                   min=xs[0], max=xs[-1])

    def to_dict(self) -> dict[str, float]:
        return {"n": self.n, "median": self.median, "q1": self.q1, "q3": self.q3, "iqr": self.iqr,
                "mean": self.mean, "stdev": self.stdev, "cv": self.cv, "min": self.min,
                "max": self.max}


def aggregate(rank_results: Sequence[dict[str, Any]], launched_at: float) -> "TrialResult":
    """An ok trial's result from the per-rank reports the worker wrote (ordered by rank). Rank
    0's window is the throughput: DDP synchronises every step, so all ranks see the same window
    to within a barrier's latency. Raises ValueError for reports that hold no measurement."""
    from ..result import Outcome, TrialResult
    if not rank_results:
        raise ValueError("aggregate: no rank results")
    r0 = rank_results[0]
    if r0.get("status") != "ok" or not r0.get("step_times") or not r0.get("window_seconds"):
        raise ValueError(f"aggregate: rank 0 has no measurement (status {r0.get('status')!r}, "
                         f"reason {r0.get('reason')!r})")
    steps = Stats.of(r0["step_times"])
    per_step = r0["samples"] / r0["timed_steps"]
    # Per-step throughput quartiles come from the opposite step-time quartiles (faster = smaller).
    thr_iqr = per_step / steps.q1 - per_step / steps.q3 if steps.q1 > 0 else 0.0
    firsts = [r["first_step_at"] for r in rank_results if r.get("first_step_at")]
    ends = [r["timed_end_at"] for r in rank_results if r.get("timed_end_at")]
    startup = max(firsts) - launched_at if firsts and launched_at else None
    wall = max(ends) - launched_at if ends and launched_at else None   # launch -> last window end
    rss = tuple(r.get("peak_rss_bytes") for r in rank_results)
    split = split_of_report(r0.get("phases"), len(r0["step_times"]),
                            sum(r0["step_times"]) / len(r0["step_times"]))
    ceiling_split = split_of_report(r0.get("ceiling_phases"), int(r0.get("ceiling_steps") or 0),
                                    float(r0.get("ceiling_step_s") or 0.0))
    compile_s, compile_cache, recompiles = launch_compile_cost(rank_results)
    return TrialResult(
        compile_s=compile_s, compile_cache=compile_cache, recompiles=recompiles,
        split=split.to_json() if split else None,
        ceiling=float(r0["ceiling"]) if r0.get("ceiling") else None,
        ceiling_split=ceiling_split.to_json() if ceiling_split else None,
        fixed=fixed_costs(r0, launched_at) if launched_at else None,
        note=str(r0.get("ceiling_problem") or ""),
        outcome=Outcome.OK, throughput=float(r0["throughput"]), throughput_iqr=thr_iqr,
        step_median_s=steps.median, step_iqr_s=steps.iqr,
        median_throughput=per_step / steps.median if steps.median > 0 else 0.0,
        window_s=float(r0["window_seconds"]), timed_steps=int(r0["timed_steps"]),
        samples=int(r0["samples"]), startup_s=startup,
        timed_share=r0["window_seconds"] / wall if wall else None,
        peak_rss_mb=tuple(round(b / 2**20) if b else None for b in rss),
        accuracy=r0.get("accuracy"), cpu_share=_cpu_share(r0),
        curve=tuple((int(n), float(q)) for n, q in (r0.get("curve") or ())), gns=r0.get("gns"),
        stopped_early=r0.get("stopped_early"))


# Below this share of its threads' CPU time, rank 0 waited for cores something else was using:
# the window measured the machine's load as much as the configuration.
BUSY_CPU_SHARE = 0.8


def busy(cpu_share: float | None) -> bool:
    """True when a trial's window was measured on a busy machine (None: not known, e.g. script
    mode, which has no timed window of its own)."""
    return cpu_share is not None and cpu_share < BUSY_CPU_SHARE


def _cpu_share(r0: dict[str, Any]) -> float | None:
    cpu = (r0.get("contention") or {}).get("cpu_seconds")
    threads = (r0.get("in_force") or {}).get("num_threads")
    if cpu is None or not threads:
        return None
    return cpu / (r0["window_seconds"] * threads)


@dataclass(frozen=True, kw_only=True)
class RatioStats(Quartiles):
    """Per-round ratios a/b of an interleaved comparison (A B A B ...): drift in machine speed
    between rounds cancels within a round, which lone absolute numbers cannot do."""
    ratios: tuple[float, ...]

    @property
    def spread(self) -> float:
        """Half the IQR: the '±' in 'verified speedup 1.62x (±0.03)'."""
        return self.iqr / 2

    @property
    def n(self) -> int:
        return len(self.ratios)

    @property
    def inconclusive(self) -> bool:
        """Neither side was faster in 3 of 4 rounds: the IQR holds ratios on both sides, or too
        few rounds agree. One round has no spread at all and proves nothing either."""
        return self.n < 2 or self.q1 <= 1.0 <= self.q3 or not (
            self.mostly(above=True) or self.mostly(above=False))

    def mostly(self, *, above: bool) -> bool:
        """At least 3 of every 4 rounds have A faster (above 1.0) or B faster. The IQR alone
        does not say so with few rounds: two rounds at 1.165 and 0.983 (the same configuration
        on both sides, on the GPU machine's 16 cores) interpolate to q1 = 1.03, which read as
        "A is faster"."""
        wins = sum((r > 1.0) if above else (r < 1.0) for r in self.ratios)
        return wins >= 0.75 * self.n

    def describe(self, what: str = "speedup") -> str:
        return f"{what} {self.median:.2f}x (±{self.spread:.2f}, {self.n} rounds)"


def ratio_stats(a_values: Sequence[float], b_values: Sequence[float]) -> RatioStats:
    """Median and IQR of a[i] / b[i] (e.g. candidate throughput over baseline, round by round)."""
    if len(a_values) != len(b_values):
        raise ValueError(f"ratio_stats: {len(a_values)} A values but {len(b_values)} B values; "
                         "rounds must pair up")
    if not a_values:
        raise ValueError("ratio_stats: no rounds")
    if any(b == 0 for b in b_values):
        raise ValueError("ratio_stats: a B value is 0")
    ratios = tuple(float(a) / float(b) for a, b in zip(a_values, b_values))
    s = Stats.of(ratios)
    return RatioStats(ratios=ratios, median=s.median, q1=s.q1, q3=s.q3)
