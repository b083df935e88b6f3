"""Write a JSON file atomically: a reader sees the old file or the complete new one, never a
torn one (a temporary file in the same folder, flushed to disk, then renamed over the target).

Used by a rank writing its result and by `autotune.report_metrics()` in a user's script, so it
imports
nothing but the standard library.
"""
from __future__ import annotations

import json
import os
from typing import Any


def write_json(path: str, data: Any, *, indent: int | None = None) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    # 0600: a result or report holds the run's details, and the results folder may be shared
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=indent)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
