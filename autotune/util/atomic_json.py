"""Write a JSON file atomically: a reader sees the old file or the complete new one, never a
torn one (a temporary file in the same folder, flushed to disk, then renamed over the target).
Read one with the caller's own error for a file that cannot be read and for one that is not JSON.

Used by a rank writing its result and by `autotune.report_metrics()` in a user's script, so it
imports
nothing but the standard library.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
from typing import Any, Callable


def write_json(path: str, data: Any, *, indent: int | None = None) -> None:
    # A fresh name created with O_EXCL | O_NOFOLLOW: a link or file someone planted at a name
    # they could guess (`<path>.tmp.<pid>`, the pid is in `ps`) made a rank truncate and rewrite
    # the link's target (issue 52). The rename replaces whatever is at `path` without following
    # it. 0600: a result or report holds the run's details, and the folder may be shared.
    tmp = f"{path}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with open(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=indent)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json_file(path: str, limit: int) -> Any:
    """The JSON value of a plain file of this user's at `path` of at most `limit` bytes: a link,
    a FIFO (which would block the open), a device or another user's file raise OSError, a file
    past `limit` or not JSON ValueError."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise OSError(errno.EPERM, "not a plain file of this user's", path)
        data = os.pread(fd, limit + 1, 0)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ValueError(f"{path} is larger than {limit} bytes")
    return json.loads(data)


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
