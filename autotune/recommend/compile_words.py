"""The words of the weighing (recommend/weigh.py) and of the compiled reference: the one function
the summary, `report`, the dashboard's note and the export header print, from the stored
recommendation's JSON (which whoever can write the study wrote: every field is checked)."""
from __future__ import annotations

import math
from typing import Any

from ..study.records import (DEFAULT_COMPILED_WON, DEFAULT_COMPILED_WORDS, Role,
                             recommends_reference)
from .weigh import NO_COMPILE_COST, RUN_LENGTH_FLAG, duration


def compile_lines(rec: dict[str, Any]) -> list[str]:
    """The figure over the default launch compiled, then what compiling costs and when it pays
    (the winner's), or why the compiled launch passed over is not recommended. Empty where
    nothing compiled and the compiled reference was not measured."""
    out = []
    weighing = rec.get("weighing") if isinstance(rec.get("weighing"), dict) else {}
    vs = _num(rec.get("vs_default_compiled"))
    if vs:
        out.append(f"{vs:.2f}x over {DEFAULT_COMPILED_WORDS}" + _to_finish(weighing))
    if recommends_reference(rec, Role.DEFAULT_COMPILED):
        out.append(DEFAULT_COMPILED_WON)
    if isinstance(weighing.get("winner"), dict):
        out.append(_winner(weighing, weighing["winner"]))
    elif isinstance(weighing.get("passed"), dict):
        out.append(_passed(weighing, weighing["passed"]))
    return out


def _to_finish(w: dict[str, Any]) -> str:
    """' at the steady rate; 2.00x to finish a run of 10m00s, its compile included'."""
    ref, win = _num(w.get("compiled_reference_finish_s")), _num(w.get("finish_s"))
    if ref is None or not win:
        return ""
    return (f" at the steady rate; {ref / win:.2f}x to finish a run of {_run(w)}, its compile "
            "included")


def _winner(w: dict[str, Any], p: dict[str, Any]) -> str:
    """'compiling pays for itself after 40 s of training (a 12 s compile, cold cache) ...'"""
    run = _run(w)
    cost, against = _num(p.get("compile_s")), _against(p)
    if cost is None:
        return f"compiled ({NO_COMPILE_COST}); the run is {run} ({RUN_LENGTH_FLAG})"
    after = _length(w, _num(p.get("break_even_s")))
    return (f"compiling pays for itself after {after} of training ({_cost(p)}) against "
            f"{against}; a run of {run} ({RUN_LENGTH_FLAG}) takes "
            f"{_time(p.get('finish_s'))} compiled, {_time(p.get('against_finish_s'))} with "
            f"{against}")


def _passed(w: dict[str, Any], p: dict[str, Any]) -> str:
    """'not recommended: compile=True ... pays for itself only after 3h10m of training ...'"""
    run, against = _run(w), _against(p)
    ratio, other = _num(p.get("ratio")) or 0.0, _num(p.get("against_ratio")) or 1.0
    head = f"not recommended: {_text(p.get('changes'))}"
    cost = _cost(p) if _num(p.get("compile_s")) is not None else NO_COMPILE_COST
    be = _num(p.get("break_even_s"))
    if be is None:
        return (f"{head} runs {ratio:.2f}x the default launch's pace once compiled ({cost}), "
                f"no faster than {against} ({other:.2f}x): compiling it never pays")
    return (f"{head} ({ratio:.2f}x once compiled, {cost}) pays for itself only after "
            f"{_length(w, be)} of training against {against}; the run is {run} "
            f"({RUN_LENGTH_FLAG}): {_time(p.get('finish_s'))} against "
            f"{_time(p.get('against_finish_s'))}")


def _cost(p: dict[str, Any]) -> str:
    cache = p.get("cache") if p.get("cache") in ("cold", "warm") else None
    return f"a {_time(p.get('compile_s'))} compile" + (f", {cache} cache" if cache else "")


def _length(w: dict[str, Any], seconds: float | None) -> str:
    """A break-even in the unit the run was given in (steps of the default launch, or time)."""
    if seconds is None:
        return "never"
    step_s = _num(w.get("step_s"))
    if isinstance(w.get("run_length"), dict) and "steps" in w["run_length"] and step_s:
        return f"{math.ceil(seconds / step_s):,} steps"
    return duration(seconds)


def _run(w: dict[str, Any]) -> str:
    return _text(w.get("run")) or "?"


def _against(p: dict[str, Any]) -> str:
    return _text(p.get("against")) or "the default launch"


def _time(value: Any) -> str:
    n = _num(value)
    return duration(n) if n is not None else "?"


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _text(value: Any) -> str:
    return " ".join(value.split())[:200] if isinstance(value, str) else ""
