"""Write a JSON file atomically: a reader sees the old file or the complete new one, never a
torn one (a temporary file in the same folder, flushed to disk, then renamed over the target).
Read one with the caller's own error for a file that cannot be read and for one that is not JSON.

Used by a rank writing its result and by `autotune.report_metrics()` in a user's script, so it
imports
nothing but the standard library.
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable


def write_json(path: str, data: Any, *, indent: int | None = None) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    # 0600: a result or report holds the run's details, and the results folder may be shared
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=indent)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_json(path: str, *, unreadable: Callable[[str], Exception],
              malformed: Callable[[str], Exception]) -> Any:
    """The JSON value in `path`; raises unreadable(the OS's words) when the file cannot be read,
    malformed(the parser's words) when it is not JSON."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise unreadable(str(exc.strerror or exc)) from None
    except ValueError as exc:
        raise malformed(str(exc)) from None
