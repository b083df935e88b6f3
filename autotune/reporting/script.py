"""What a script study's scores are: their unit, what the score is computed from, the knobs the
script overrode and its accuracy noise floor (nothing for a built-in workload)."""
from __future__ import annotations

from typing import Any

from ..quality.script_floor import stored_script_floor
from ..study.attrs import StudyAttrs


def script_facts(attrs: StudyAttrs | dict[str, Any]) -> dict[str, Any]:
    """Unit and notes of a script study (nothing for a built-in workload)."""
    attrs = StudyAttrs(attrs)
    if not attrs.script_command:
        return {}
    metric = attrs.script_metric
    if metric and attrs.script_lower_is_better:
        what = f"score = 1 / the median of --metric {metric!r} (lower is better)"
    elif metric:
        what = f"score = the median of --metric {metric!r}"
    else:
        what = "score = 1 / wall seconds per run (or autotune.report_metrics()), start-up included"
    notes = [what] + [f"not tuned, the script sets its own {k}: {why}"
                      for k, why in attrs.script_overrides.items()]
    floor = _script_floor_line(attrs)
    return {"unit": "score", "script_notes": tuple(notes + ([floor] if floor else []))}


def _script_floor_line(attrs: StudyAttrs) -> str:
    """The script's --accuracy noise floor over seeds, or why the gate has none."""
    floor = attrs.script_noise_floor
    s = stored_script_floor(attrs)
    if s is not None:
        seeds = ", ".join(str(x) for x in floor.get("seeds") or [])
        return (f"accuracy noise floor: the default launch measured {s.describe()} over seeds "
                f"{seeds}; the gate allows --max-accuracy-drop plus this noise")
    return floor.get("note") or ""
