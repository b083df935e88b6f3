"""What a training script may call to hand autotune its own numbers (script mode).

    import autotune
    autotune.report_metrics(samples_per_sec=img_per_s, accuracy=val_acc)

Each rank started by a trial has AUTOTUNE_REPORT in its environment: a JSON file this writes
(atomically; later calls update earlier keys). Outside autotune the variable is absent and the
call does nothing, so a script keeps working unchanged under torchrun or plain python.
No torch import here: the call must cost nothing and work in any script.
"""
from __future__ import annotations

import json
import math
import os

from .atomic_json import write_json

REPORT_ENV = "AUTOTUNE_REPORT"
KEYS = ("samples_per_sec", "accuracy", "samples", "seconds")


def report_metrics(*, samples_per_sec: float | None = None, accuracy: float | None = None,
                   samples: float | None = None, seconds: float | None = None) -> bool:
    """Record this rank's metrics for the running trial; returns False (and does nothing)
    outside autotune. (Named for what it does: `autotune report` is the command that shows a
    study; `autotune.report`, the name earlier versions had, stays an alias.)
    samples_per_sec: this run's training throughput (global samples/s, or this rank's; rank 0's
    report is the trial's score). accuracy: higher is better, on [0, 1].
    samples/seconds: work done and the time it took, used when samples_per_sec is not given."""
    path = os.environ.get(REPORT_ENV)
    if not path:
        return False
    given = {"samples_per_sec": samples_per_sec, "accuracy": accuracy, "samples": samples,
             "seconds": seconds}
    data: dict = {}
    try:
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
        data = old if isinstance(old, dict) else {}
    except (OSError, ValueError):
        pass
    for key, value in given.items():
        if value is None:
            continue
        value = float(value)  # a tensor or numpy scalar becomes a plain number here
        if not math.isfinite(value):
            raise ValueError(f"autotune.report_metrics({key}={value}): must be a finite number")
        data[key] = value
    write_json(path, data)
    return True
