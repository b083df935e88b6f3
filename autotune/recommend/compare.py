"""`autotune compare`: an interleaved A/B of two configurations (pure but for `evaluate`).

The rounds run through recommend.interleave (A B, B A, A B, ...) and the ratio is
measure.ratio_stats, the same code and statistics as the search's verification: the median of
per-round A/B throughput ratios, half their IQR as the spread, and "inconclusive" when that IQR
holds 1.0. Each window's CPU share is shown because a ratio measured while something else took
the cores says little.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..result import Evaluate, Outcome
from ..config import Config, changed_knobs
from ..progress import SILENT, Progress
from ..measure.stats import RatioStats, Stats, ratio_stats
from ..measure.contention import disturbed
from .settle import Settling, settle
from .rounds import interleave


@dataclass(frozen=True, kw_only=True)
class Window:
    """One timed run of one side."""
    side: str                       # "A" or "B"
    round: int                      # 1-based
    outcome: str
    throughput: float | None = None
    cpu_share: float | None = None  # CPU time received / (window x threads); None for scripts
    reason: str = ""
    outside_share: float | None = None  # of its cores taken by other processes (contention.py)

    def __post_init__(self) -> None:
        if self.side not in ("A", "B"):
            raise ValueError(f"Window.side={self.side!r}: must be 'A' or 'B'")


@dataclass(frozen=True, kw_only=True)
class Comparison:
    a: Config
    b: Config
    windows: tuple[Window, ...]     # in the order they ran

    def side(self, name: str) -> list[Window]:
        return [w for w in self.windows if w.side == name]

    @property
    def pairs(self) -> list[tuple[float, float]]:
        """(A, B) throughputs of the rounds where both sides completed."""
        return [(a.throughput, b.throughput) for a, b in zip(self.side("A"), self.side("B"))
                if a.outcome == b.outcome == Outcome.OK and a.throughput and b.throughput]

    @property
    def stats(self) -> RatioStats | None:
        pairs = self.pairs
        return ratio_stats([a for a, _ in pairs], [b for _, b in pairs]) if pairs else None

    @property
    def settling(self) -> Settling | None:
        """The same verdict as verification's on A/B: settled only on quiet, agreeing rounds."""
        return self._settle("A")

    def _settle(self, over: str) -> Settling | None:
        """The verdict on `over`'s throughput over the other side's, round by round."""
        rounds = [(a, b) for a, b in zip(self.side("A"), self.side("B"))
                  if a.outcome == b.outcome == Outcome.OK and a.throughput and b.throughput]
        return settle([(a.throughput / b.throughput) if over == "A" else
                       (b.throughput / a.throughput) for a, b in rounds],
                      [max(s) if (s := [w.outside_share for w in (a, b)
                                        if w.outside_share is not None]) else None
                       for a, b in rounds])

    @property
    def verified(self) -> tuple[str, Settling] | None:
        """The faster side and the verdict on its ratio over the other, when the rounds prove a
        figure (settled or a lower bound, as verification's headline); None otherwise."""
        side = {"A is faster": "A", "B is faster": "B"}.get(self.verdict)
        settling = self._settle(side) if side else None
        return (side, settling) if settling is not None and settling.verdict.verified else None

    @property
    def disturbed_windows(self) -> int:
        return sum(disturbed(w.outside_share) for w in self.windows)

    @property
    def verdict(self) -> str:
        s = self.stats
        if s is None:
            return "no complete round"
        if s.inconclusive:
            return "inconclusive"
        return "A is faster" if s.q1 > 1.0 else "B is faster"

    def verdict_text(self) -> str:
        """The verdict with the figure the rounds prove, worded as verification's headline:
        'A is faster, verified ≥1.75x over B (95% lower bound, 12 rounds; median 1.90x)'."""
        if self.verified is None:
            return self.verdict
        side, settling = self.verified
        figure, what = settling.figure()
        return f"{self.verdict}, verified {figure} over {'B' if side == 'A' else 'A'} ({what})"

    def to_json(self) -> dict[str, Any]:
        s = self.stats
        shares = {k: [w.cpu_share for w in self.side(k) if w.cpu_share is not None]
                  for k in ("A", "B")}
        return {"a": self.a.to_dict(), "b": self.b.to_dict(),
                "windows": [{"side": w.side, "round": w.round, "outcome": w.outcome,
                             "throughput": w.throughput, "cpu_share": w.cpu_share,
                             "reason": w.reason} for w in self.windows],
                "ratios": list(s.ratios) if s else [],
                "median": s.median if s else None, "q1": s.q1 if s else None,
                "q3": s.q3 if s else None, "spread": s.spread if s else None,
                "rounds": s.n if s else 0, "verdict": self.verdict,
                "verdict_text": self.verdict_text(),
                "cpu_share": {k: Stats.of(v).to_dict() if v else None
                              for k, v in shares.items()},
                "outside_share": [w.outside_share for w in self.windows],
                "settling": self.settling.to_json() if self.settling else None}


def compare(a: Config, b: Config, evaluate: Evaluate, *, rounds: int,
            progress: Progress = SILENT) -> Comparison:
    if rounds < 1:
        raise ValueError(f"rounds={rounds}: must be at least 1")
    evals = interleave([("A", a), ("B", b)], evaluate, rounds=rounds, progress=progress)
    order = []
    for rnd in range(len(evals[0])):
        sides = ("A", "B") if rnd % 2 == 0 else ("B", "A")   # as interleave ran them
        for side in sides:
            ev = evals[0 if side == "A" else 1][rnd]
            ok = ev.outcome == Outcome.OK
            order.append(Window(side=side, round=rnd + 1, outcome=ev.outcome,
                                throughput=ev.throughput if ok else None,
                                cpu_share=ev.cpu_share if ok else None,
                                reason=ev.reason, outside_share=ev.outside_share))
    return Comparison(a=a, b=b, windows=tuple(order))


def describe(c: Comparison, unit: str = "samples/s") -> str:
    """The comparison as a person reads it: what differs, each window, the ratio and verdict."""
    da, db = c.a.to_dict(), c.b.to_dict()
    diff = [k for k in da if da[k] != db[k]]
    same = " ".join(f"{k}={v}" for k, v in changed_knobs(c.a).items() if k not in diff)
    lines = [f"A: {' '.join(f'{k}={da[k]}' for k in diff) or '(same as B)'}",
             f"B: {' '.join(f'{k}={db[k]}' for k in diff) or '(same as A)'}",
             f"both: {same or 'the default launch otherwise'}"]
    for w in c.windows:
        if w.outcome == Outcome.OK:
            share = f"cpu share {w.cpu_share:.2f}" if w.cpu_share is not None else "cpu share n/a"
            if w.outside_share is not None:
                share += f", {w.outside_share:.0%} of its cores taken by other processes" + (
                    " [disturbed]" if disturbed(w.outside_share) else "")
            lines.append(f"round {w.round} {w.side}: {w.throughput:10.2f} {unit}   {share}")
        else:
            lines.append(f"round {w.round} {w.side}: {w.outcome} ({w.reason})")
    s = c.stats
    if s is None:
        lines.append("A/B: no round completed on both sides")
        return "\n".join(lines)
    lines.append(f"A/B throughput ratio: median {s.median:.3f}x (±{s.spread:.3f}; IQR "
                 f"{s.q1:.3f}-{s.q3:.3f}; rounds {', '.join(f'{x:.3f}' for x in s.ratios)})")
    why = {"inconclusive": " (one round has no spread)" if s.n < 2 else
           " (the spread crosses 1.0: run more --rounds, on a quieter machine)"
           if s.q1 <= 1.0 <= s.q3 else
           " (neither side was faster in 3 of 4 rounds: run more --rounds)"}
    lines.append(f"verdict: {c.verdict_text()}{why.get(c.verdict, '')}")
    settling = c.settling
    if settling is not None and c.verified is None:   # a proven figure is the verdict's
        lines.append(f"ratio: {settling.describe()}")
    if c.disturbed_windows:
        lines.append(f"warning: other processes took the cores in {c.disturbed_windows} of "
                     f"{len(c.windows)} windows; these ratios say as much about that load as "
                     "about A and B: compare again when the machine is quiet")
    return "\n".join(lines)
