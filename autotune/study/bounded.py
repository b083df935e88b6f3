"""The numbers a study carries, bounded where they are read (issue 52, item 5).

A shared study is written by every worker's account, and a study file by whoever can write it:
each number in it is data. Unbounded, a stored `quality_run_samples` made one quality run take
the whole budget, an `Infinity` in the budget account crashed `autotune report`, a noise floor
claiming 10**30 seeds made the report count them, and a claim's deadline of Infinity kept a
worker waiting for a verifier that does not exist. So study/attrs.py hands out each stored value
through one of these: a number outside its bounds (not finite, negative, beyond what any search
writes) reads as absent, and a container of the wrong type as empty; the caller's default then
applies, as for a study written before the value existed.
"""
from __future__ import annotations

import math
import time
from typing import Any

from ..config.limits import (MAX_BUDGET_S, MAX_CHECKPOINTS, MAX_GLOBAL_BATCH, MAX_SAMPLES,
                             MAX_WINDOW_S)
from ..training import MAX_QUALITY_SEEDS

# Seconds an account books: a search's budget (a week at most), with room for what overran it.
MAX_ACCOUNT_S = 10 * MAX_BUDGET_S
MAX_RUNS = 1 << 20          # runs of any kind in one search's account
MAX_TOLERANCE_PP = 100.0    # --max-accuracy-drop, in percentage points of accuracy


def number(value: Any, low: float, high: float) -> float | None:
    """`value` when it is a real, finite number in [low, high] (a bool is not), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:    # an int past float's range
        return None
    return value if math.isfinite(value) and low <= value <= high else None


def integer(value: Any, low: int, high: int) -> int | None:
    """`value` when it is an integer (or an integral float) in [low, high], else None."""
    found = number(value, low, high)
    return int(found) if found is not None and found == int(found) else None


def mapping(value: Any) -> dict[str, Any]:
    """A stored object as a dict ({} for anything else)."""
    return dict(value) if isinstance(value, dict) else {}


_SETTINGS = {   # name: (low, high, integral)
    "target_seconds": (1e-3, MAX_WINDOW_S, False),
    "max_accuracy_drop": (0.0, MAX_TOLERANCE_PP, False),
    "quality_samples": (1, MAX_SAMPLES, True),
    "quality_seeds": (2, MAX_QUALITY_SEEDS, True),
    "reference_batch": (1, MAX_GLOBAL_BATCH, True),
}


def settings(raw: Any) -> dict[str, Any]:
    """The stored trial settings with each known number in bounds (absent otherwise) and
    `batchnorm` a bool."""
    out = mapping(raw)
    for name, (low, high, integral) in _SETTINGS.items():
        if name in out:
            found = (integer if integral else number)(out[name], low, high)
            if found is None:
                del out[name]
            else:
                out[name] = found
    if not isinstance(out.get("batchnorm", True), bool):
        del out["batchnorm"]
    return out


def quality_length(value: Any) -> int | None:
    return integer(value, 1, MAX_SAMPLES)


def samples(values: Any) -> list[float]:
    """A list of finite numbers, at most MAX_QUALITY_SEEDS of them ([] for anything else)."""
    if not isinstance(values, list) or len(values) > MAX_QUALITY_SEEDS:
        return []
    kept = [number(v, -math.inf, math.inf) for v in values]
    return [v for v in kept if v is not None] if None not in kept else []


def noise_floor(raw: Any) -> dict[str, Any] | None:
    """The default launch's seeded quality: its values, their mean, sd and count agreeing with
    them, and a positive noise scale (None: not stored, or not one the search writes)."""
    floor = mapping(raw)
    values = samples(floor.get("values"))
    if not values or integer(floor.get("n"), 1, MAX_QUALITY_SEEDS) != len(values) or \
            number(floor.get("mean"), -math.inf, math.inf) is None or \
            number(floor.get("sd"), 0.0, math.inf) is None:
        return None
    floor["values"] = values
    if "b_noise" in floor:
        floor["b_noise"] = number(floor["b_noise"], 0.0, float(MAX_SAMPLES))
    return floor


def script_noise_floor(raw: Any) -> dict[str, Any]:
    floor = mapping(raw)
    if "values" in floor:
        floor["values"] = samples(floor["values"])
    if "seeds" in floor:
        seeds = [integer(s, 0, 2**63 - 1) for s in floor["seeds"]] \
            if isinstance(floor["seeds"], list) and len(floor["seeds"]) <= MAX_QUALITY_SEEDS \
            else [None]
        floor["seeds"] = [s for s in seeds if s is not None] if None not in seeds else []
    return floor


def budget_account(raw: Any) -> dict[str, Any] | None:
    """Where the last search's budget went, each figure a finite number of seconds or runs in
    bounds (one that is not is left out), its next step a string."""
    if not isinstance(raw, dict):
        return None
    out: dict[str, Any] = {}
    for key in ("budget_s", "elapsed_s", "fixed_s", "other_s"):
        if (v := number(raw.get(key), 0.0, MAX_ACCOUNT_S)) is not None:
            out[key] = v
    for key in ("warm_runs", "configurations", "ignored_files"):
        if (v := integer(raw.get(key), 0, MAX_RUNS)) is not None:
            out[key] = v
    out["seconds"] = {k: v for k, s in mapping(raw.get("seconds")).items()
                      if isinstance(k, str) and (v := number(s, 0.0, MAX_ACCOUNT_S)) is not None}
    for key in ("runs", "warm"):    # runs per kind, and how many of them were windows
        out[key] = {k: v for k, r in mapping(raw.get(key)).items()
                    if isinstance(k, str) and (v := integer(r, 0, MAX_RUNS)) is not None}
    if isinstance(raw.get("next_step"), str):
        out["next_step"] = raw["next_step"]
    settle = raw.get("settle")
    if isinstance(settle, list) and len(settle) <= MAX_QUALITY_SEEDS:
        out["settle"] = [line for line in settle if isinstance(line, str)]
    return out


def deadline(value: Any) -> float | None:
    """A stored deadline (epoch seconds) a live search could have written: none (an older
    version's) stays None; one that is not a finite number, or further ahead than the longest
    budget, reads as already past (0)."""
    if value is None:
        return None
    found = number(value, 0.0, time.time() + MAX_BUDGET_S + 3600.0)
    return found if found is not None else 0.0


def quality_run(raw: Any) -> dict[str, Any] | None:
    """One stored seeded quality run (quality/evidence.py writes them): its quality a finite
    number, or None with its `failure` (why it gave none); its seconds, samples, look plan,
    learning curve and gradient-noise probe within bounds (each one that is not reads as
    absent); None for what is not a run at all.

    A run that gave no quality is a failure, and stays one however it was written: an explicit
    marker (`failure`), a None quality (every study: its `reason` says why), a quality that is
    not a finite number (a run that diverged, stored as NaN), or anything else in its place (a
    study is data: named, never read as a number). Nothing stored is rewritten."""
    if not isinstance(raw, dict):
        return None
    stored = raw.get("quality")
    quality = number(stored, -math.inf, math.inf)
    reason = raw.get("reason") if isinstance(raw.get("reason"), str) else None
    marker = raw.get("failure") if isinstance(raw.get("failure"), str) else None
    if quality is not None and not marker:
        failure = None
    elif marker or stored is None:
        failure = marker or reason or "quality run failed"
    elif isinstance(stored, (int, float)) and not isinstance(stored, bool):
        failure = f"diverged: its stored quality is {stored}"
    else:
        failure = (f"its stored quality {str(stored)[:40]!r} is neither a number nor a failure "
                   "marker")
    return {"quality": None if failure else quality, "failure": failure,
            "reason": reason if failure is None or reason else failure,
            "seconds": number(raw.get("seconds"), 0.0, MAX_ACCOUNT_S) or 0.0,
            "samples": integer(raw.get("samples"), 1, MAX_SAMPLES),
            "plan": integer(raw.get("plan"), 1, MAX_QUALITY_SEEDS),
            "curve": _curve(raw.get("curve")), "gns": _gns(raw.get("gns"))}


def _curve(raw: Any) -> list[list[float]] | None:
    if not isinstance(raw, list) or len(raw) > MAX_CHECKPOINTS + 1:
        return None
    points = [[integer(p[0], 0, MAX_SAMPLES), number(p[1], -math.inf, math.inf)]
              if isinstance(p, list) and len(p) == 2 else [None, None] for p in raw]
    return points if all(None not in p for p in points) and points else None


def _gns(raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        return None
    small, big = integer(raw.get("small"), 1, MAX_GLOBAL_BATCH), \
        integer(raw.get("big"), 1, MAX_GLOBAL_BATCH)
    lists = [raw.get("small_sq"), raw.get("big_sq")]
    if small is None or big is None or not all(
            isinstance(v, list) and 0 < len(v) <= MAX_CHECKPOINTS and
            all(number(x, 0.0, math.inf) is not None for x in v) for v in lists):
        return None
    return {"small": small, "big": big, "small_sq": lists[0], "big_sq": lists[1]}
