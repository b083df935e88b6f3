"""Script mode: tune a user's own training command (`autotune search -- python train.py ...`).

Pure: placeholders are filled from a Config, metrics are read from text and JSON the runner left
behind. Metrics, in order of preference:
  1. `autotune.report(samples_per_sec=..., accuracy=...)` from the script (rank 0's report);
  2. `--metric REGEX` over rank 0's output: the MEDIAN of all matches (warm-up lines and one-off
     spikes move it less than the last or the mean would);
  3. neither: the work done per second of wall time for the whole run (report(samples=...) / wall,
     else 1 / wall), start-up included. The weakest measure: it only ranks configurations right
     when the script does a fixed amount of work, and it is labelled as such wherever it appears.
"""
from __future__ import annotations

import os
import re
import shutil
import statistics
import string
from dataclasses import dataclass, fields
from typing import Any

from .config import Config
from .errors import WorkloadError

# Knobs that act only inside the training process; a script that takes no placeholder for one
# cannot be affected by it, so the search does not spend trials on it.
IN_PROCESS_KNOBS = ("batch_size", "global_batch", "lr_rule", "precision", "channels_last",
                    "compile", "ipex")
# The global batch reaches a script through either placeholder: {batch_size} is filled with each
# rank's share of it (global_batch / nproc), as the built-in worker splits it.
_ACTS_THROUGH = {"global_batch": ("global_batch", "batch_size"), "lr_rule": ("lr_rule",)}
SOURCES = {"report": "autotune.report() from the script",
           "pattern": "the --metric pattern over rank 0's output (median of the matches)",
           "wall_time": "work per second of wall time for the whole run, start-up included "
                        "(weakest measure: no autotune.report() and no --metric)"}


def knob_names() -> list[str]:
    return [f.name for f in fields(Config)]


def placeholders(template: tuple[str, ...]) -> list[str]:
    """Knob names used as {knob} in the command (in order, once each); unknown ones raise."""
    used: list[str] = []
    for arg in template:
        try:
            parsed = list(string.Formatter().parse(arg))
        except ValueError as exc:
            raise WorkloadError(f"command argument {arg!r}: {exc} (write {{{{ and }}}} for "
                                "literal braces)") from None
        for _, name, _, _ in parsed:
            if name is None:
                continue
            if name not in knob_names():
                raise WorkloadError(f"command placeholder {{{name}}} is not a knob; knobs: "
                                    f"{', '.join('{' + k + '}' for k in knob_names())}")
            if name not in used:
                used.append(name)
    return used


def fill(template: tuple[str, ...], config: Config) -> tuple[str, ...]:
    values = {k: _text(v) for k, v in config.to_dict().items()}
    values["batch_size"] = str(config.micro_batch)
    return tuple(arg.format(**values) for arg in template)


def _text(value: Any) -> str:
    if value is None:
        return "auto"
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def check_command(template: tuple[str, ...], metric: str | None) -> None:
    """Everything that can be checked before a trial: a command, its program, its script file,
    its placeholders and the metric pattern."""
    if not template:
        raise WorkloadError("nothing after `--`: give the training command, e.g. "
                            "-- python train.py --batch-size {batch_size}")
    placeholders(template)
    prog = template[0]
    if shutil.which(prog) is None:
        raise WorkloadError(f"command {prog!r} not found (not on PATH, or not executable)")
    if os.path.basename(prog).startswith("python") and len(template) > 1:
        script = template[1]
        if not script.startswith("-") and script.endswith(".py") and not os.path.isfile(script):
            raise WorkloadError(f"script not found: {script} (from {os.getcwd()})")
    compile_metric(metric)


def compile_metric(metric: str | None) -> re.Pattern[str] | None:
    if metric is None:
        return None
    try:
        pattern = re.compile(metric)
    except re.error as exc:
        raise WorkloadError(f"--metric {metric!r}: not a regular expression: {exc}") from None
    if pattern.groups > 1:
        raise WorkloadError(f"--metric {metric!r}: use at most one (group) around the number")
    return pattern


def metric_values(text: str, metric: str) -> list[float]:
    """Every number the pattern captures in `text` (group 1, else the whole match)."""
    pattern = compile_metric(metric)
    assert pattern is not None
    out = []
    for m in pattern.finditer(text):
        try:
            out.append(float(m.group(1) if pattern.groups else m.group(0)))
        except ValueError:
            continue
    return out


@dataclass(frozen=True, kw_only=True)
class ScriptMetric:
    value: float | None              # higher is better; None: no metric where one was required
    source: str                      # a key of SOURCES
    accuracy: float | None = None
    values: tuple[float, ...] = ()   # every value the pattern matched
    problem: str = ""                # why value is None


def script_metric(*, report: dict[str, Any] | None, log_text: str, metric: str | None,
                  wall_seconds: float) -> ScriptMetric:
    """The score of one finished script run, by the order of preference in the module doc."""
    report = report or {}
    acc = report.get("accuracy")
    acc = float(acc) if isinstance(acc, (int, float)) else None
    sps = report.get("samples_per_sec")
    if isinstance(sps, (int, float)) and sps > 0:
        return ScriptMetric(value=float(sps), source="report", accuracy=acc)
    if metric is not None:
        values = metric_values(log_text, metric)
        if not values:
            return ScriptMetric(value=None, source="pattern", accuracy=acc,
                                problem=f"no metric found in the output (--metric {metric!r} "
                                        "matched nothing in rank 0's output)")
        return ScriptMetric(value=statistics.median(values), source="pattern", accuracy=acc,
                            values=tuple(values))
    samples = report.get("samples")
    seconds = report.get("seconds") or wall_seconds
    work = float(samples) if isinstance(samples, (int, float)) and samples > 0 else 1.0
    return ScriptMetric(value=work / max(float(seconds), 1e-9), source="wall_time", accuracy=acc)


def restrict_space(space, used: list[str]):
    """The space without in-process knobs the command has no placeholder for (they would change
    nothing the script does); returns (space, dropped knob names)."""
    from dataclasses import replace
    dropped = [k for k in space.knobs if k in IN_PROCESS_KNOBS
               and not set(_ACTS_THROUGH.get(k, (k,))) & set(used)]
    if not dropped:
        return space, []
    knobs = {k: v for k, v in space.knobs.items() if k not in dropped}
    return replace(space, knobs=knobs), dropped
