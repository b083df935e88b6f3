"""One search per machine: concurrent trials on the same cores disturb each other's timings.

The lock is per user: in $XDG_RUNTIME_DIR/autotune (made by the login for this user alone), else
in <tmp>/autotune-<uid>, a folder made 0700 and checked to be ours. A lock in a folder anyone can
write to could be planted by another user (a link to the victim's ~/.bashrc, truncated and
overwritten by the next search), and their 0644 file made every other user's search fail with a
PermissionError. See docs/security.md, "Locks and concurrent searches".
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import tempfile
import time

from ..errors import LockError
from ..util.file_lock import describe_pid, flock_holders, open_lock_file, printable, safe_folder


def lock_folder() -> str:
    """Where this user's machine locks live (created and checked on first use)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        try:
            st = os.lstat(runtime)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077:
                return safe_folder(os.path.join(runtime, "autotune"))
        except OSError:
            pass       # set but missing (su, sudo): the temporary folder below
    return safe_folder(os.path.join(tempfile.gettempdir(), f"autotune-{os.getuid()}"))


def machine_key(fingerprint: str, host_names: tuple[str, ...] = ()) -> str:
    """What one lock guards: this machine's cores, or the hosts a search's trials run on. Two
    searches started from one login node, each in its own SLURM allocation, use other nodes and
    may run side by side; two over the same hosts may not."""
    if not host_names:
        return fingerprint
    return f"{fingerprint}-hosts-{hashlib.sha256(','.join(host_names).encode()).hexdigest()[:12]}"


class MachineLock:
    """An advisory flock on a per-machine file; released by the kernel even after kill -9."""

    def __init__(self, fingerprint: str, *, directory: str | None = None,
                 advice: str = "pass --allow-concurrent to run anyway"):
        self._directory = directory
        self._name = f"autotune-{fingerprint}.lock"
        self.path = os.path.join(directory, self._name) if directory else ""
        self._advice = advice
        self._fd: int | None = None

    def acquire(self) -> "MachineLock":
        if not self.path:
            self.path = os.path.join(lock_folder(), self._name)
        fd = open_lock_file(self.path, mode=0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self._holder(fd)
            os.close(fd)
            raise LockError(f"another autotune search is running on this machine ({holder}); "
                            "trials at the same time would disturb each other's timings. Wait "
                            f"for it, or {self._advice}") from None
        if os.fstat(fd).st_uid == os.getuid():   # never write into a file that is not ours
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()}, since {time.strftime('%H:%M:%S')}".encode())
        self._fd = fd
        return self

    @staticmethod
    def _holder(fd: int) -> str:
        """Who holds it: the kernel's word (/proc/locks), else what the holder wrote."""
        pids = flock_holders(fd)
        if pids:
            return ", ".join(describe_pid(p) for p in pids)
        return printable(os.pread(fd, 200, 0).decode(errors="replace")) or "another process"

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> "MachineLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
