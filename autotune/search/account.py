"""Where a search's budget went, and what the next budget step would buy.

Every evaluation a search makes passes through `Accounted`, which books its seconds under what it
was for: a trial (the search's throughput windows), quality (seeded runs that judge a class, the
noise floor among them), confirmation (the seeded runs that confirm a winner that changes the
math) or verification (the interleaved rounds), with the fixed cost inside each (process start,
imports, model, warm-up: measure/split.fixed_costs). The summary, `report` and `report --json`
show the account; the study keeps it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..measure.split import ran_warm
from ..result import Evaluate, TrialResult
from ..util.clean import one_line
from .budget import format_seconds

KINDS = ("trials", "quality", "confirmation", "verification")
# The budgets a user is offered next, in seconds (a search of 7.5 minutes is offered 10).
BUDGET_STEPS = (300, 600, 900, 1800, 3600, 7200, 14400)


@dataclass
class Account:
    """Seconds, runs and fixed costs booked per kind; configurations launched."""
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(KINDS, 0.0))
    runs: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    fixed_s: float = 0.0
    # runs per kind that were a window of a running launch (no start)
    warm: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    configurations: set[str] = field(default_factory=set)
    # files in trial folders that were not their launch's (planted or corrupt), ignored
    ignored_files: int = 0
    # torch.compile: seconds spent compiling (inside the fixed costs' warm-ups, shown apart:
    # measure/compile_cost.py), and the runs that compiled by inductor's cache state
    compile_s: float = 0.0
    compiled: dict[str, int] = field(default_factory=lambda: {"cold": 0, "warm": 0})
    recompiles: int = 0

    def book(self, kind: str, out: TrialResult, key: str) -> None:
        self.seconds[kind] += out.seconds
        self.runs[kind] += 1
        self.fixed_s += sum((out.fixed or {}).values())
        if ran_warm(out.fixed):
            self.warm[kind] += 1
        self.ignored_files += out.ignored_files
        if out.compile_cache in self.compiled:
            self.compiled[out.compile_cache] += 1
            self.compile_s += out.compile_s or 0.0
            self.recompiles += out.recompiles or 0
        if kind == "trials":
            self.configurations.add(key)

    @property
    def warm_runs(self) -> int:
        return sum(self.warm.values())

    def to_json(self, *, elapsed_s: float, budget_s: float, next_step: str = "",
                settle: list[str] | None = None, unused_why: str = "") -> dict[str, Any]:
        spent = sum(self.seconds.values())
        return {"budget_s": round(budget_s, 1), "elapsed_s": round(elapsed_s, 1),
                "seconds": {k: round(v, 1) for k, v in self.seconds.items()},
                "runs": dict(self.runs), "fixed_s": round(self.fixed_s, 1),
                "warm_runs": self.warm_runs, "warm": dict(self.warm),
                "ignored_files": self.ignored_files,
                "compile_s": round(self.compile_s, 1), "compiled": dict(self.compiled),
                "recompiles": self.recompiles,
                "other_s": round(max(0.0, elapsed_s - spent), 1),
                # the budget never used, and why any was left (commands/search_next.py)
                "unused_s": round(max(0.0, budget_s - elapsed_s), 1), "unused_why": unused_why,
                "configurations": len(self.configurations), "next_step": next_step,
                "settle": list(settle or ())}


def describe(account: dict[str, Any]) -> list[str]:
    """The account as the summary's lines (from its stored form)."""
    secs, runs = account.get("seconds") or {}, account.get("runs") or {}
    words = {"trials": "trials", "quality": "quality runs", "confirmation": "confirmation runs",
             "verification": "verification windows"}
    parts = [f"{k} {format_seconds(secs[k])} ({runs.get(k, 0)} {words[k]})"
             for k in KINDS if secs.get(k)]
    total_runs = sum(runs.values()) or 1
    lines = [f"where the budget went: {', '.join(parts) or 'nothing measured'}; "
             f"other {format_seconds(account.get('other_s', 0.0))}"
             + (f"; unused {format_seconds(account['unused_s'])}" if "unused_s" in account
                else ""),
             f"  fixed costs (starts, models, warm-ups) {format_seconds(account.get('fixed_s', 0))}"
             f" of it; {account.get('warm_runs', 0)} of {total_runs} runs were windows of a "
             f"launch already running{_warm_by_kind(account, runs)}; "
             f"{account.get('configurations', 0)} configurations measured"]
    lines += _compile_line(account)
    if account.get("unused_why") and account.get("unused_s", 0) >= 1:   # a stored string
        lines.append(f"  unused {format_seconds(account['unused_s'])}: "
                     f"{one_line(account['unused_why'])}")
    ignored = account.get("ignored_files")
    if isinstance(ignored, int) and ignored > 0:
        lines.append(f"  {ignored} file(s) in trial folders were not their launch's (planted or "
                     "corrupt) and were ignored: see the trials' notes")
    if account.get("next_step"):   # a stored string: shown escaped, on its line
        lines.append(f"  {one_line(account['next_step'])}")
    lines += [f"  {one_line(line)}" for line in account.get("settle") or ()
              if isinstance(line, str)]
    return lines


def next_step(*, budget_s: float, trial_s: float | None, wants: list[tuple[str, float]],
              exhausted: bool) -> str:
    """'a 10m budget would also confirm precision=bf16 global_batch=64 (~70 s) and measure
    about 30 more configurations': what the next budget step buys, from what this one left
    undone (`wants`: (what, seconds) in order of worth) and the trials' typical cost."""
    bigger = next((b for b in BUDGET_STEPS if b > budget_s * 1.05), budget_s * 2)
    extra = bigger - budget_s
    bought = []
    for what, seconds in wants:
        if seconds <= extra:
            bought.append(f"{what} (~{seconds:.0f} s)")
            extra -= seconds
    if trial_s and not exhausted and extra >= trial_s:
        bought.append(f"measure about {int(extra // trial_s)} more configurations")
    if not bought:
        return ""
    head = ", ".join(bought[:-1]) + (" and " if len(bought) > 1 else "") + bought[-1]
    return f"a {_budget_words(bigger)} budget would also {head}"


def _budget_words(seconds: float) -> str:
    return f"{seconds / 3600:g}h" if seconds >= 3600 else f"{seconds / 60:g}-minute"


class Accounted:
    """An Evaluate that books each call in `account`: "accuracy" runs as quality while the
    search samples and as confirmation after it, "throughput" ones as trials, then as
    verification (`phase` says which: "search" or "recommend"). Side-by-side runs across hosts
    pass through (lanes, at_once) and are booked each."""

    def __init__(self, evaluate: Evaluate, account: Account) -> None:
        self.inner, self.account, self.phase = evaluate, account, "search"

    def _kind(self, mode: str) -> str:
        if self.phase == "search":
            return "quality" if mode == "accuracy" else "trials"
        return "confirmation" if mode == "accuracy" else "verification"

    def __call__(self, config, mode: str, **kw) -> TrialResult:
        out = self.inner(config, mode, **kw)
        self.account.book(self._kind(mode), out, config.key())
        return out

    def running(self, config) -> bool:
        running = getattr(self.inner, "running", None)
        return bool(running and running(config))

    def lanes(self, config) -> int:
        lanes = getattr(self.inner, "lanes", None)
        return lanes(config) if lanes is not None else 1

    def at_once(self, config, mode: str, seeds: list[int], samples: int | None = None):
        outs = self.inner.at_once(config, mode, seeds, samples=samples)
        for out in outs:
            self.account.book(self._kind(mode), out, config.key())
        return outs


def _compile_line(account: dict[str, Any]) -> list[str]:
    """'  compiling (torch.compile) 41 s of the fixed costs: 3 run(s) compiled cold, 5 warm
    (...), 0 recompile(s)'; nothing for an account without compiled runs (or stored before)."""
    compiled = account.get("compiled")
    if not isinstance(compiled, dict) or not any(isinstance(v, int) and v > 0
                                                 for v in compiled.values()):
        return []
    cold, warm = int(compiled.get("cold") or 0), int(compiled.get("warm") or 0)
    return [f"  compiling (torch.compile) {format_seconds(float(account.get('compile_s') or 0))} "
            f"of the fixed costs: {cold} run(s) compiled cold, {warm} warm (from the cache, or "
            "a compiled model kept), "
            f"{int(account.get('recompiles') or 0)} recompile(s)"]


def _warm_by_kind(account: dict[str, Any], runs: dict[str, int]) -> str:
    """Which of the runs were windows, kind by kind (a search's quality runs and verification
    rounds are windows too, or say why not); "" for an account stored without it."""
    warm = account.get("warm") or {}
    parts = [f"{k} {warm.get(k, 0)}/{runs[k]}" for k in KINDS if runs.get(k)]
    return f" ({', '.join(parts)})" if warm and parts else ""
