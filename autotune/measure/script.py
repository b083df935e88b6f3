"""Script mode: tune a user's own training command (`autotune search -- python train.py ...`).

Pure: placeholders are filled from a Config, metrics are read from text and JSON the runner left
behind. Metrics, in order of preference:
  1. `autotune.report(samples_per_sec=..., accuracy=...)` from the script (rank 0's report);
  2. `--metric REGEX` over rank 0's output: the MEDIAN of all matches (warm-up lines and one-off
     spikes move it less than the last or the mean would);
  3. neither: the work done per second of wall time for the whole run (report(samples=...) / wall,
     else 1 / wall), start-up included. The weakest measure: it only ranks configurations right
     when the script does a fixed amount of work, and it is labelled as such wherever it appears.
With `--lower-is-better` the --metric number is a time or a loss: the score is its inverse, so
every ratio (speedup = default's time / tuned time) reads the same as for a throughput. Whatever
the score, what is printed is the number the script printed, in its own unit (the wall-time
fallback prints seconds per run).
Accuracy: autotune.report(accuracy=...), else the LAST match of `--accuracy REGEX` (the final
evaluation); a `%` right after the number means percent, so 93.5% is stored as 0.935 like the
built-in workloads' accuracy.
"""
from __future__ import annotations

import os
import re
import shutil
import statistics
import string
from dataclasses import dataclass, fields
from typing import Any

from ..config import IN_PROCESS_KNOBS, Config
from ..errors import WorkloadError

# The global batch reaches a script through either placeholder: {batch_size} is filled with each
# rank's share of it (global_batch / nproc), as the built-in worker splits it.
_ACTS_THROUGH = {"global_batch": ("global_batch", "batch_size"), "lr_rule": ("lr_rule",)}
SOURCES = {"report": "autotune.report() from the script",
           "pattern": "the --metric pattern over rank 0's output (median of the matches)",
           "wall_time": "work per second of wall time for the whole run, start-up included "
                        "(weakest measure: no autotune.report() and no --metric)"}


def knob_names() -> list[str]:
    return [f.name for f in fields(Config)]


# Not a knob: the seed of a quality run (the script's noise floor over seeds), also given to every
# script rank as $AUTOTUNE_SEED. 0 outside the noise floor's runs, and in exports and launches.
SEED = "seed"
SEED_ENV = "AUTOTUNE_SEED"


def placeholders(template: tuple[str, ...]) -> list[str]:
    """Knob names used as {knob} in the command (in order, once each; {seed} is not a knob and
    not listed); unknown ones raise."""
    used: list[str] = []
    for arg in template:
        try:
            parsed = list(string.Formatter().parse(arg))
        except ValueError as exc:
            raise WorkloadError(f"command argument {arg!r}: {exc} (write {{{{ and }}}} for "
                                "literal braces)") from None
        for _, name, _, _ in parsed:
            if name is None or name == SEED:
                continue
            if name not in knob_names():
                raise WorkloadError(f"command placeholder {{{name}}} is not a knob; knobs: "
                                    f"{', '.join('{' + k + '}' for k in knob_names())}")
            if name not in used:
                used.append(name)
    return used


def fill(template: tuple[str, ...], config: Config, seed: int = 0) -> tuple[str, ...]:
    values = {k: _text(v) for k, v in config.to_dict().items()}
    values["batch_size"] = str(config.micro_batch)
    values[SEED] = str(seed)
    return tuple(arg.format(**values) for arg in template)


def takes_seed(template: tuple[str, ...]) -> bool:
    """Whether the script can be given a seed: {seed} in the command, or $AUTOTUNE_SEED read by
    the Python script it runs."""
    if any("{" + SEED + "}" in arg for arg in template):
        return True
    for arg in template[1:]:
        if arg.endswith(".py") and os.path.isfile(arg):
            try:
                with open(arg, encoding="utf-8", errors="replace") as f:
                    return SEED_ENV in f.read()
            except OSError:
                return False
    return False


def _text(value: Any) -> str:
    if value is None:
        return "auto"
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def check_command(template: tuple[str, ...], metric: str | None, accuracy: str | None = None,
                  lower_is_better: bool = False) -> None:
    """Everything that can be checked before a trial: a command, its program, its script file,
    its placeholders and the metric and accuracy patterns."""
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
    compile_metric(accuracy, "--accuracy")
    if lower_is_better and metric is None:
        raise WorkloadError("--lower-is-better applies to --metric: give the pattern of the time "
                            "or loss, e.g. --metric 'Training time: ([0-9.]+)'")


def compile_metric(metric: str | None, option: str = "--metric") -> re.Pattern[str] | None:
    if metric is None:
        return None
    try:
        pattern = re.compile(metric)
    except re.error as exc:
        raise WorkloadError(f"{option} {metric!r}: not a regular expression: {exc}") from None
    if pattern.groups > 1:
        raise WorkloadError(f"{option} {metric!r}: use at most one (group) around the number")
    return pattern


def metric_values(text: str, metric: str, *, percent: bool = False) -> list[float]:
    """Every number the pattern captures in `text` (group 1, else the whole match). `percent`:
    a number written with a trailing % (inside the group or right after it) is divided by 100."""
    pattern = compile_metric(metric)
    assert pattern is not None
    group = 1 if pattern.groups else 0
    out = []
    for m in pattern.finditer(text):
        number = m.group(group).strip()
        scale = 1.0
        if percent and (number.endswith("%") or text[m.end(group):m.end(group) + 1] == "%"):
            number, scale = number.rstrip("%").strip(), 0.01
        try:
            out.append(float(number) * scale)
        except ValueError:
            continue
    return out


@dataclass(frozen=True, kw_only=True)
class ScriptMetric:
    value: float | None              # the score, higher is better; None: no metric where required
    source: str                      # a key of SOURCES
    accuracy: float | None = None
    values: tuple[float, ...] = ()   # every score the pattern gave (inverted when lower is better)
    problem: str = ""                # why value is None
    shown: str = ""                  # the measured number in the script's own unit, for people


def script_metric(*, report: dict[str, Any] | None, log_text: str, metric: str | None,
                  wall_seconds: float, accuracy: str | None = None,
                  lower_is_better: bool = False) -> ScriptMetric:
    """The score of one finished script run, by the order of preference in the module doc."""
    report = report or {}
    acc = report.get("accuracy")
    acc = float(acc) if isinstance(acc, (int, float)) else None
    if acc is None and accuracy is not None:
        found = metric_values(log_text, accuracy, percent=True)
        acc = found[-1] if found else None
    sps = report.get("samples_per_sec")
    if isinstance(sps, (int, float)) and sps > 0:
        return ScriptMetric(value=float(sps), source="report", accuracy=acc,
                            shown=f"{float(sps):.4g} samples/s (autotune.report)")
    if metric is not None:
        raw = metric_values(log_text, metric)
        if lower_is_better:
            raw = [v for v in raw if v > 0]   # 0 s or a 0 loss cannot be inverted into a score
        if not raw:
            return ScriptMetric(value=None, source="pattern", accuracy=acc,
                                problem=f"no metric found in the output (--metric {metric!r} "
                                        "matched nothing"
                                        f"{' positive' if lower_is_better else ''} in rank 0's "
                                        "output)")
        median = statistics.median(raw)
        scores = [1.0 / v for v in raw] if lower_is_better else raw
        return ScriptMetric(value=1.0 / median if lower_is_better else median, source="pattern",
                            accuracy=acc, values=tuple(scores),
                            shown=f"{median:.4g} (--metric, "
                                  f"{'lower' if lower_is_better else 'higher'} is better)")
    samples = report.get("samples")
    seconds = float(report.get("seconds") or wall_seconds)
    work = float(samples) if isinstance(samples, (int, float)) and samples > 0 else 1.0
    shown = (f"{work / max(seconds, 1e-9):.4g} samples/s over the whole run" if work != 1.0
             else f"{seconds:.2f} s per run (wall time)")
    return ScriptMetric(value=work / max(seconds, 1e-9), source="wall_time", accuracy=acc,
                        shown=shown)


def freeze(space, knobs) -> tuple[Any, list[str]]:
    """The space with `knobs` no longer varied: each is held at the default launch's value (a
    knob the script overrides changes nothing, so varying it would only spend trials on noise).
    Returns (space, the knobs that were varied before)."""
    from dataclasses import replace
    held = [k for k in knobs if k in space.knobs or (k == "nproc" and "nproc_per_node" in space.knobs)]
    if not held:
        return space, []
    drop = set(held) | ({"nproc_per_node"} if "nproc" in held else set())
    fixed = {**space.fixed, **{k: getattr(Config(), k) for k in drop}}
    return replace(space, knobs={k: v for k, v in space.knobs.items() if k not in drop},
                   fixed=fixed), held


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
