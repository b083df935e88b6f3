"""The weighing (issue 59): a compile is paid once per launch, the steady rate after it for the
whole run, so the recommendation is the launch that finishes the user's run first, not the one
fastest at its peak. Pure arithmetic on verified figures, and the one function that words it
(`compile_lines`), so the summary, `report`, the dashboard and the export header cannot drift.

The run's length (`--run-length`) is a time or a step count:
- a time is the work the default launch does in that time: the user's training takes that long
  today, untuned; every other launch does the same samples at its own pace;
- a step count is steps of the default launch's global batch (the recipe the user runs); a
  launch with another global batch does the same samples in its own steps.
Either way it becomes `default_s`, the default launch's seconds for the run, and a launch that
runs `ratio` times the default's pace and compiles in `compile_s` finishes in
compile_s + default_s / ratio. The default launch does not compile.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Protocol

from ..config import Config, describe_changes
from ..errors import ConfigError
from ..measure.stats import RatioStats
from ..result import TrialResult
from ..search.budget import parse_duration
from ..study.records import Role

# An hour: a short real training run, next to a compile of seconds to a few minutes (issue 59
# measured seconds on the built-in workload). At that length a compile that is steadily faster
# pays unless it costs a good share of the hour, and one of minutes for a 1% gain still loses.
DEFAULT_RUN_LENGTH = "1h"
RUN_LENGTH_FLAG = "--run-length"
MAX_RUN_S = 366 * 86400.0           # a year of training
MAX_STEPS = 10 ** 12
_STEPS = re.compile(r"(\d+)\s*steps?")
NO_COMPILE_COST = "its compile cost was not measured"


@dataclass(frozen=True)
class RunLength:
    """The user's run: `seconds` of the default launch's training, or `steps` of its batch."""
    seconds: float | None = None
    steps: int | None = None

    def text(self) -> str:
        return f"{self.steps} steps" if self.steps is not None else duration(self.seconds or 0.0)

    def to_json(self) -> dict[str, Any]:
        return {"steps": self.steps} if self.steps is not None else {"seconds": self.seconds}

    @classmethod
    def from_json(cls, stored: Any) -> "RunLength | None":
        """A stored run length (None: absent or not one a search writes)."""
        if not isinstance(stored, dict):
            return None
        steps, seconds = stored.get("steps"), stored.get("seconds")
        if isinstance(steps, int) and not isinstance(steps, bool) and 0 < steps <= MAX_STEPS:
            return cls(steps=steps)
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) \
                and math.isfinite(seconds) and 0 < seconds <= MAX_RUN_S:
            return cls(seconds=float(seconds))
        return None


def parse_run_length(text: str) -> RunLength:
    """'2h', '30m', '90s', '1h30m' (as --budget) or '5000steps' / '5000 steps'."""
    raw = str(text).strip().lower()
    steps = _STEPS.fullmatch(raw)
    if steps:
        n = int(steps.group(1))
        if not 0 < n <= MAX_STEPS:
            raise ConfigError(f"{RUN_LENGTH_FLAG} {text!r}: steps must be from 1 to {MAX_STEPS:,}")
        return RunLength(steps=n)
    if raw.endswith(("step", "steps")) or re.search(r"\d\.\d*\s*steps?$", raw):
        raise ConfigError(f"{RUN_LENGTH_FLAG} {text!r}: steps are a whole number, e.g. 5000steps")
    seconds = parse_duration(text, RUN_LENGTH_FLAG)
    if seconds > MAX_RUN_S:
        raise ConfigError(f"{RUN_LENGTH_FLAG} {text!r}: more than a year of training")
    return RunLength(seconds=seconds)


def duration(seconds: float) -> str:
    """'40 s', '3m20s', '2h05m': a length a reader compares with --run-length."""
    s = max(0, round(seconds))
    if s < 100:
        return f"{s} s"
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s"


def compile_cost(results: Iterable[TrialResult | None]) -> tuple[float | None, str | None]:
    """(seconds, "cold" | "warm") a launch's compile costs, from the measurements of it: the
    median of the cold ones when there are any (the user's run may start without the cache:
    another machine, a cleaned folder), else of the warm ones; (None, None) when none compiled."""
    measured = [(r.compile_s, r.compile_cache) for r in results
                if r is not None and r.compile_s is not None and math.isfinite(r.compile_s)]
    cold = [s for s, cache in measured if cache == "cold"]
    if cold:
        return max(0.0, statistics.median(cold)), "cold"
    if measured:
        return max(0.0, statistics.median(s for s, _ in measured)), "warm"
    return None, None


class Weighed(Protocol):
    """A verified launch as the weighing reads it (recommend/recommendation.Verified)."""
    config: Config
    role: str
    compile_s: float | None
    compile_cache: str | None

    @property
    def ratios(self) -> tuple[float, ...]: ...

    @property
    def holds(self) -> bool: ...

    @property
    def ratio(self) -> RatioStats: ...


def compiles(v: Weighed) -> bool:
    return v.config.compile or v.compile_s is not None


def break_even_s(ratio: float, compile_s: float, against: float) -> float | None:
    """The run length (default launch's seconds) past which a launch compiling in `compile_s` at
    `ratio` finishes sooner than one at `against` that does not compile; None: never."""
    if ratio <= against:
        return None
    return compile_s / (1.0 / against - 1.0 / ratio)


@dataclass(frozen=True)
class Weigher:
    """The run a recommendation serves, in the default launch's seconds (`step_s`: its seconds
    per step, where the run was given in steps, to say a break-even in steps too)."""
    run: RunLength
    default_s: float
    step_s: float | None = None

    @classmethod
    def of(cls, run: RunLength, default_throughput: float | None,
           samples_per_step: int) -> "Weigher | None":
        """None where a run in steps meets no default samples/s to turn it into time."""
        step_s = samples_per_step / default_throughput if default_throughput else None
        if run.steps is None:
            return cls(run, float(run.seconds or 0.0), step_s)
        return cls(run, run.steps * step_s, step_s) if step_s else None

    def finish_s(self, v: Weighed) -> float:
        """Seconds the launch takes to finish the run, its compile included."""
        return (v.compile_s or 0.0) + self.default_s / v.ratio.median

    def ranked(self, holding: Iterable[Weighed]) -> list:
        """The launches that hold up and finish before the default launch, soonest first."""
        return sorted((v for v in holding if v.ratios and self.finish_s(v) < self.default_s),
                      key=self.finish_s)

    def to_json(self, winner: Weighed | None, verified: Iterable[Weighed]) -> dict[str, Any]:
        """What the recommendation stores of the weighing: the run, the winner's compile and
        break-even against the eager launch it beat, and the compiled launch it passed over."""
        verified = [v for v in verified if v.ratios]
        out: dict[str, Any] = {"run_length": self.run.to_json(), "run": self.run.text(),
                               "default_s": self.default_s, "step_s": self.step_s,
                               "finish_s": self.finish_s(winner) if winner else self.default_s}
        ref = next((v for v in verified if v.role == Role.DEFAULT_COMPILED), None)
        if ref is not None and ref.compile_s is not None:
            out["compiled_reference_finish_s"] = self.finish_s(ref)
        if winner is not None and compiles(winner):
            eager = [v for v in verified if not compiles(v) and v.holds
                     and self.finish_s(v) >= self.finish_s(winner)]
            alt = min(eager, key=self.finish_s, default=None)
            out["winner"] = self._pair(winner, alt)
        elif (passed := self._passed(winner, verified)) is not None:
            out["passed"] = self._pair(passed, winner)
        return out

    def _passed(self, winner: Weighed | None, verified: list[Weighed]) -> Weighed | None:
        """The fastest compiled launch verified that does not finish before the winner."""
        end = self.finish_s(winner) if winner is not None else self.default_s
        later = [v for v in verified if compiles(v) and v is not winner
                 and self.finish_s(v) >= end]
        return max(later, key=lambda v: v.ratio.median, default=None)

    def _pair(self, compiled: Weighed, eager: Weighed | None) -> dict[str, Any]:
        ratio, against = compiled.ratio.median, eager.ratio.median if eager else 1.0
        cost = compiled.compile_s
        return {"changes": describe_changes(compiled.config), "ratio": ratio,
                "compile_s": cost, "cache": compiled.compile_cache,
                "finish_s": self.finish_s(compiled),
                "against": describe_changes(eager.config) if eager else None,
                "against_ratio": against,
                "against_finish_s": self.finish_s(eager) if eager else self.default_s,
                "break_even_s": break_even_s(ratio, cost or 0.0, against)}
