"""What a training script may call to hand autotune its own numbers (script mode).

    import autotune
    autotune.report_metrics(samples_per_sec=img_per_s, accuracy=val_acc)

Each rank started by a trial has AUTOTUNE_REPORT in its environment: a JSON file this writes
(atomically; later calls update earlier keys), with the launch's token (util/channel.py: from the
environment, or across hosts from the token file of the trial folder). Outside autotune the variable is absent and the
call does nothing, so a script keeps working unchanged under torchrun or plain python.
No torch import here: the call must cost nothing and work in any script.
"""
from __future__ import annotations

import math
import os

from .util.atomic_json import read_json_file, write_json
from .util.channel import FOLDER_ENV, TOKEN_ENV, TOKEN_FILE_ENV, read_token_file
from .util.checked_folder import FolderRefused, NotOurs, open_private
from .result import PHASES

REPORT_ENV = "AUTOTUNE_REPORT"
_MAX_REPORT_BYTES = 1 << 20
KEYS = ("samples_per_sec", "accuracy", "samples", "seconds", "split")


def report_metrics(*, samples_per_sec: float | None = None, accuracy: float | None = None,
                   samples: float | None = None, seconds: float | None = None,
                   split: dict[str, float] | None = None) -> bool:
    """Record this rank's metrics for the running trial; returns False (and does nothing)
    outside autotune. (Named for what it does: `autotune report` is the command that shows a
    study; `autotune.report`, the name earlier versions had, stays an alias.)
    samples_per_sec: this run's training throughput (global samples/s, or this rank's; rank 0's
    report is the trial's score). accuracy: higher is better, on [0, 1].
    samples/seconds: work done and the time it took, used when samples_per_sec is not given.
    split: where one typical step's time goes, in seconds by phase ({"data": 0.031, "copy":
    0.002, "compute": 0.041, "allreduce": 0.004, "optimizer": 0.003}; any of them, and "step"
    for the whole step when the phases do not add up to it); the search shows it as it shows
    the built-in workloads' own."""
    checked = _checked_split(split) if split is not None else None
    path = os.environ.get(REPORT_ENV)
    if not path:
        return False
    given = {"samples_per_sec": samples_per_sec, "accuracy": accuracy, "samples": samples,
             "seconds": seconds}
    data: dict = {}
    try:   # what an earlier call wrote; a link, FIFO or huge file at the name is not that
        old = read_json_file(path, _MAX_REPORT_BYTES)
        data = old if isinstance(old, dict) else {}
    except (OSError, ValueError):
        pass
    if checked is not None:
        data["split"] = checked
    for key, value in given.items():
        if value is None:
            continue
        value = float(value)  # a tensor or numpy scalar becomes a plain number here
        if not math.isfinite(value):
            raise ValueError(f"autotune.report_metrics({key}={value}): must be a finite number")
        data[key] = value
    # the launch's token (util/channel.py): the runner takes a report only with it
    data.pop("token", None)
    if (token := _launch_token(path)) is not None:
        data["token"] = token
    write_json(path, data)
    return True


_TOKENS: dict[str, str] = {}   # across hosts: the token file read once per trial folder


def _launch_token(report: str) -> str | None:
    """The launch's token (util/channel.py): in the environment on the runner's machine; across
    hosts in the file the environment names, in the trial folder, read there as a rank reads
    it (the folder checked first). None: a report without it, which the runner ignores."""
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV]
    name, folder_path = os.environ.get(TOKEN_FILE_ENV), os.path.dirname(os.path.abspath(report))
    if not name:
        return None
    if folder_path not in _TOKENS:
        try:
            with open_private(folder_path, identity=os.environ.get(FOLDER_ENV)) as folder:
                _TOKENS[folder_path] = read_token_file(folder, name)
        except (FolderRefused, NotOurs, OSError):
            return None
    return _TOKENS[folder_path]


def _checked_split(split: dict[str, float]) -> dict[str, float]:
    """The split as stored: known phase names (and "step"), finite seconds >= 0, a step > 0."""
    if not isinstance(split, dict) or not split:
        raise ValueError("autotune.report_metrics(split=...): give a dict of seconds by phase, "
                         f"phases: {', '.join(PHASES)} (and step)")
    out = {}
    for name, value in split.items():
        if name not in (*PHASES, "step"):
            raise ValueError(f"autotune.report_metrics(split=...): unknown phase {name!r}; "
                             f"phases: {', '.join(PHASES)} (and step)")
        value = float(value)
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"autotune.report_metrics(split={{{name!r}: {value}}}): seconds "
                             "must be a finite number >= 0")
        out[name] = value
    out.setdefault("step", sum(v for k, v in out.items() if k != "step"))
    if out["step"] <= 0:
        raise ValueError("autotune.report_metrics(split=...): the step takes no time")
    return out
