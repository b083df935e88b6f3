"""Script mode's command template: a user's training command with {knob} placeholders
(`autotune search -- python train.py --batch-size {batch_size}`). Checked before any trial,
filled per configuration, and the space cut down to the knobs the command can act on. Pure,
apart from looking for the program and the script file when checking.
"""
from __future__ import annotations

import os
import re
import shutil
import string
from dataclasses import fields
from typing import Any

from ..config import IN_PROCESS_KNOBS, Config, did_you_mean
from ..errors import WorkloadError

# The global batch reaches a script through either placeholder: {batch_size} is filled with each
# rank's share of it (global_batch / nproc), as the built-in worker splits it.
_ACTS_THROUGH = {"global_batch": ("global_batch", "batch_size"), "lr_rule": ("lr_rule",)}


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
        for _, name, spec, _ in parsed:
            if name is None:
                continue
            _check_spec(arg, name, spec or "")
            if name == SEED:
                continue
            if name not in knob_names():
                raise WorkloadError(f"command placeholder {{{name}}} is not a "
                                    f"knob{did_you_mean(name, knob_names())}; knobs: "
                                    f"{', '.join('{' + k + '}' for k in knob_names())}")
            if name not in used:
                used.append(name)
    return used


# A width or precision is filled in memory before anything runs: a stored `{nproc:>2000000000}`
# asked for 2 GB per argument. No command line needs a number this big in a format spec.
MAX_FORMAT_NUMBER = 64


def _check_spec(arg: str, name: str, spec: str) -> None:
    numbers = [int(n) for n in re.findall(r"\d+", spec)]
    if "{" in spec or any(n > MAX_FORMAT_NUMBER for n in numbers):
        shown = arg if len(arg) <= 80 else arg[:80] + "..."
        raise WorkloadError(f"command argument {shown!r}: the format spec of {{{name}}} "
                            f"({spec[:40]!r}) is refused: widths and precisions above "
                            f"{MAX_FORMAT_NUMBER}, and placeholders inside it, are not allowed")


def fill(template: tuple[str, ...], config: Config, seed: int = 0) -> tuple[str, ...]:
    """The command with its placeholders filled; a template that placeholders() refuses (a
    stored one, say) raises WorkloadError before any text is made."""
    placeholders(template)
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


def freeze(space, knobs) -> tuple[Any, list[str]]:
    """The space with `knobs` no longer varied: each is held at the default launch's value (a
    knob the script overrides changes nothing, so varying it would only spend trials on noise).
    Returns (space, the knobs that were varied before)."""
    from dataclasses import replace
    held = [k for k in knobs if k in space.knobs or (k == "nproc" and "ranks_per_numa_node" in space.knobs)]
    if not held:
        return space, []
    drop = set(held) | ({"ranks_per_numa_node"} if "nproc" in held else set())
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
