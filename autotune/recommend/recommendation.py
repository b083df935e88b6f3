"""What a verification found (recommend/verify.py measures it): each candidate's rounds beside the
default launch (`Verified`), and the recommendation they make (`Recommendation`): its headline,
its verdict (settled, a lower bound or unsettled: recommend/settle.py) and its JSON, which the
summary, `report`, `export` and `launch` read. `unverified` is the recommendation of a search
that had no time left to verify."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import Config, describe_changes
from ..measure.stats import RatioStats, Stats, ratio_stats
from ..study.records import Record
from .settle import MIN_GAIN, Settling, Verdict, settle


@dataclass(frozen=True, kw_only=True)
class Verified:
    config: Config
    role: str
    search_throughput: float | None
    throughputs: tuple[float, ...]     # per completed round
    baselines: tuple[float, ...]       # the default launch's throughput in the same rounds
    accuracy: float | None = None
    # per round: the larger share other processes took in its two windows (None: not measured)
    outside: tuple[float | None, ...] = ()
    # what compiling costs this launch once (recommend/weigh.compile_cost; None: not compiled)
    compile_s: float | None = None
    compile_cache: str | None = None

    @property
    def settling(self) -> Settling | None:
        return settle(self.ratios, self.outside or (None,) * len(self.ratios))

    @property
    def ratios(self) -> tuple[float, ...]:
        return tuple(c / d for c, d in zip(self.throughputs, self.baselines))

    @property
    def ratio(self) -> RatioStats:
        return ratio_stats(self.throughputs, self.baselines)

    @property
    def holds(self) -> bool:
        """Beats the default launch by at least MIN_GAIN in the median round and in at least 3
        of 4 rounds (its lower quartile stays above 1). Ratios within a round are compared, not
        absolute speeds: a machine that slowed down since the search slows both."""
        if not self.ratios:
            return False
        return (self.ratio.median >= MIN_GAIN and self.ratio.q1 > 1.0
                and self.ratio.mostly(above=True))

    @property
    def shrink(self) -> float | None:
        """Verified over searched throughput: well below 1 means the search saw a lucky run."""
        if not self.search_throughput or not self.throughputs:
            return None
        return Stats.of(list(self.throughputs)).median / self.search_throughput


@dataclass(frozen=True, kw_only=True)
class Recommendation:
    config: Config
    speedup: float                     # median per-round ratio over the default launch
    spread: float                      # half the IQR of those ratios
    rounds: int
    verified: bool
    vs_run_cpu: float | None = None    # median per-round ratio over the run_cpu heuristic
    vs_default_compiled: float | None = None   # ... over the default launch compiled
    accuracy: float | None = None
    default_accuracy: float | None = None
    default_throughput: float | None = None
    throughput: float | None = None
    candidates: tuple[Verified, ...] = ()
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    default_wins: bool = False         # no candidate beat the default launch (CPU or GPU default)
    settling: Settling | None = None   # what the winner's rounds prove (recommend/settle)

    @property
    def verdict(self) -> Verdict:
        """Settled, a lower bound or unsettled: the one answer the headline, the JSON, `report`,
        `export` and `launch` read (a recommendation without rounds to judge counts as settled,
        as one stored before verdicts did)."""
        return self.settling.verdict if self.settling is not None else Verdict.SETTLED

    @property
    def settled(self) -> bool:
        return self.verdict is Verdict.SETTLED

    @property
    def inconclusive(self) -> bool:
        """The default launch is recommended only because no candidate's rounds proved anything:
        not a verdict to launch by (`launch` refuses it; `autotune verify` measures the
        candidates). A candidate bounded above MIN_GAIN that did not hold up is a verdict."""
        if not (self.default_wins or self.config == Config()):
            return False
        if self.settling is None:   # candidates there were, and none finished a round
            return bool(self.candidates) and not any(v.ratios for v in self.candidates)
        return not self.verdict.verified

    def headline(self) -> str:
        if not self.verified:
            return f"unverified speedup {self.speedup:.2f}x over the default launch ({self.note})"
        if self.inconclusive and self.settling is None:
            return ("no verified speedup: no candidate completed a verification round in the "
                    "budget; `autotune verify` measures the search's best candidates against the "
                    "default launch")
        if self.inconclusive:
            # verify re-measures the study's best candidates when it recommends the default
            return (f"no verified speedup: the best candidate{self._best_named()} measured "
                    f"{self.settling.describe()}; " + self.settling.next_step())
        if self.default_wins or self.config == Config():
            return (f"no verified speedup: the default launch is the best configuration found "
                    f"({self.note})" if self.note else "no verified speedup over the default launch")
        if not self.verdict.verified:
            return (f"faster than the default launch, by how much is {self.settling.describe()}; "
                    + self.settling.next_step())
        figure, what = (self.settling.figure() if self.settling
                        else (f"{self.speedup:.2f}x", f"{self.rounds} rounds"))
        return f"verified speedup {figure} over the default launch ({what})"

    def _best_named(self) -> str:
        """' (threads=2 precision=bf16)': the candidate that came closest, named so the user
        knows what `autotune verify` will measure again."""
        best = max((v for v in self.candidates if v.ratios), key=lambda v: v.ratio.median,
                   default=None)
        return f" ({describe_changes(best.config)})" if best is not None else ""

    def to_json(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "speedup": self.speedup, "spread": self.spread,
                "rounds": self.rounds, "verified": self.verified, "vs_run_cpu": self.vs_run_cpu,
                "vs_default_compiled": self.vs_default_compiled,
                "weighing": self.extra.get("weighing"),
                "accuracy": self.accuracy, "default_accuracy": self.default_accuracy,
                "throughput": self.throughput, "default_throughput": self.default_throughput,
                "headline": self.headline(), "note": self.note, "settled": self.settled,
                "verdict": self.verdict.value, "inconclusive": self.inconclusive,
                "accuracy_claim": self.extra.get("quality"),
                "unproven": self.extra.get("unproven") or [],
                "references": self.extra.get("references") or [],
                "settling": self.settling.to_json() if self.settling else None,
                "candidates": [{"config": v.config.to_dict(), "role": v.role,
                                "search_throughput": v.search_throughput,
                                "throughputs": list(v.throughputs), "ratios": list(v.ratios),
                                "outside_share": list(v.outside),
                                "shrink": v.shrink, "holds": v.holds,
                                "compile_s": v.compile_s, "compile_cache": v.compile_cache}
                               for v in self.candidates]}


def unverified(best: Record, default: Record, why: str) -> Recommendation:
    """When no time is left to verify: say so, and report the search's own single measurement."""
    speed = best.throughput / default.throughput if best.throughput and default.throughput else 1.0
    return Recommendation(config=best.config, speedup=speed, spread=0.0, rounds=0, verified=False,
                          accuracy=best.accuracy, default_accuracy=default.accuracy,
                          default_throughput=default.throughput, throughput=best.throughput,
                          note=why)
