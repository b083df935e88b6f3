"""Time budgets: parse `90s`, `30m`, `1h30m`, and plan how a budget is spent (pure)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import BudgetError

_PART = re.compile(r"(\d+(?:\.\d+)?)([hms])")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0}


def parse_budget(text: str) -> float:
    """'90s' -> 90.0, '30m' -> 1800.0, '1h30m' -> 5400.0; a bare number means seconds."""
    raw = str(text).strip().lower().replace(" ", "")
    if not raw:
        raise BudgetError("--budget: empty; use e.g. 90s, 30m or 1h30m")
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        seconds = float(raw)
    else:
        pos, seconds, seen = 0, 0.0, set()
        for m in _PART.finditer(raw):
            if m.start() != pos or m.group(2) in seen:
                break
            seen.add(m.group(2))
            seconds += float(m.group(1)) * _UNIT[m.group(2)]
            pos = m.end()
        if pos != len(raw) or not seen or not _order(raw):
            raise BudgetError(f"--budget {text!r}: not a duration; use e.g. 90s, 30m or 1h30m")
    if seconds <= 0:
        raise BudgetError(f"--budget {text!r}: must be more than zero")
    if seconds > 7 * 24 * 3600:
        raise BudgetError(f"--budget {text!r}: more than a week; did you mean minutes (m)?")
    return seconds


def _order(raw: str) -> bool:
    """Units must come largest first, as people write them (1h30m, not 30m1h)."""
    units = [m.group(2) for m in _PART.finditer(raw)]
    return units == sorted(units, key="hms".index)


def format_seconds(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


@dataclass(frozen=True, kw_only=True)
class BudgetPlan:
    """How a search spends its budget: timed window per trial and what verification keeps."""
    total_s: float
    target_seconds: float     # timed window of each search trial
    verify_reserve_s: float   # kept back for interleaved verification at the end
    min_trial_s: float        # do not start a trial with less than this left


def plan_budget(total_s: float, *, startup_s: float = 4.0) -> BudgetPlan:
    """Shorter budgets get shorter timed windows so that enough configurations get tried.

    A trial costs start-up (about 3 s here from launch to the first step) plus warmup plus the
    window; below ~2 s of window, start-up dominates and step-time noise grows.
    """
    if total_s < 60:
        raise BudgetError(f"--budget {total_s:.0f}s is too short: one trial takes ~10s and the "
                          "search needs references and verification; use at least 60s")
    window = 2.0 if total_s < 300 else 3.0 if total_s < 1200 else 5.0
    trial_s = startup_s + 1.0 + window
    reserve = min(0.25 * total_s, 4 * 3 * trial_s)  # up to 3 rounds x (3 candidates + default)
    return BudgetPlan(total_s=total_s, target_seconds=window, verify_reserve_s=reserve,
                      min_trial_s=trial_s * 1.5)
