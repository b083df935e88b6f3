"""One search per machine: concurrent trials on the same cores disturb each other's timings."""
from __future__ import annotations

import fcntl
import os
import tempfile
import time

from ..errors import LockError


class MachineLock:
    """An advisory flock on a per-machine file; released by the kernel even after kill -9."""

    def __init__(self, fingerprint: str, *, directory: str | None = None):
        self.path = os.path.join(directory or tempfile.gettempdir(), f"autotune-{fingerprint}.lock")
        self._fd: int | None = None

    def acquire(self) -> "MachineLock":
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise LockError(f"another autotune search is running on this machine ({holder}); "
                            "trials at the same time would disturb each other's timings. Wait "
                            "for it, or pass --allow-concurrent to run anyway") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}, since {time.strftime('%H:%M:%S')}".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> "MachineLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
