"""The study-wide lock of a shared search: 'read the study, then write a claim' made atomic for
every worker on one storage (see shared.py for why a lock and not an optimistic claim).

A PostgreSQL advisory lock (session-level, so a worker that dies releases it with its
connection; no table of ours in the user's database), or an flock beside an SQLite/journal file
(several searches on one machine with --allow-concurrent). Both are waited for up to a deadline,
then refused with a LockError that names the holder: a hung holder (stopped, or a connection
dead but not yet noticed by the server) made every other worker wait for ever.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
import time
from typing import Iterator

from ..errors import LockError, StorageError
from ..util.file_lock import open_lock_file, wait_flock
from ..study.storage import redact, redact_message


# The study lock is held for milliseconds (one read of the study and one write); waiting this
# long means its holder hangs (stopped, or its connection dead but not yet noticed by the server).
STUDY_LOCK_WAIT_S = 300.0


class StudyLock:
    """Makes 'read the study, then write a claim' atomic for every worker on this storage."""

    def __init__(self, url: str, study_name: str, *, wait_s: float = STUDY_LOCK_WAIT_S):
        self.atomic = True
        self.wait_s = wait_s
        self._what = f"the study lock of {study_name}"
        self._local = threading.Lock()   # one holder per process as well (tests use threads)
        self._conn = None
        self._fd: int | None = None
        # 63 bits of the study name: every worker of this study, and only they, share the lock
        self._key = int.from_bytes(hashlib.sha1(study_name.encode()).digest()[:8], "big") >> 1
        path = next((url[len(s):] for s in ("sqlite:///", "journal:///") if url.startswith(s)), None)
        if url.split(":", 1)[0].split("+")[0] == "postgresql":
            self._conn = _pg_connection(url)
        elif path and path != ":memory:":
            self._fd = open_lock_file(f"{path}.claims.lock", mode=0o644)
            self._what += f" ({path}.claims.lock)"
        else:
            self.atomic = False  # another server kind: claims hold within this process only

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """The lock, waited for up to `wait_s` (then a LockError naming who holds it)."""
        from sqlalchemy import text
        if not self._local.acquire(timeout=self.wait_s):
            raise LockError(f"{self._what} has been held by another thread of this process for "
                            f"more than {self.wait_s:g} s")
        try:
            if self._conn is not None:
                self._pg_acquire()
            elif self._fd is not None:
                wait_flock(self._fd, wait_s=self.wait_s, what=self._what)
            try:
                yield
            finally:
                if self._conn is not None:
                    self._conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": self._key})
                elif self._fd is not None:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._local.release()

    def _pg_acquire(self) -> None:
        """pg_try_advisory_lock until `wait_s` has passed: a plain pg_advisory_lock waits for
        ever behind a holder whose connection is dead but not yet noticed by the server."""
        from sqlalchemy import text
        deadline, pause = time.monotonic() + self.wait_s, 0.01
        while not self._conn.execute(text("SELECT pg_try_advisory_lock(:k)"),
                                     {"k": self._key}).scalar():
            if time.monotonic() >= deadline:
                raise LockError(f"{self._what} has been held for more than {self.wait_s:g} s "
                                f"by {self._pg_holder()}; if that worker hangs, end its session "
                                "(SELECT pg_terminate_backend(pid))") from None
            time.sleep(pause)
            pause = min(pause * 2, 0.2)

    def _pg_holder(self) -> str:
        """The server session holding the lock: pid, user, client and which autotune it is."""
        from sqlalchemy import text
        row = self._conn.execute(text(
            "SELECT a.pid, a.usename, a.client_addr, a.application_name FROM pg_locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND "
            "l.granted AND l.classid::text::bigint = :hi AND l.objid::text::bigint = :lo AND "
            "l.objsubid = 1"), {"hi": self._key >> 32, "lo": self._key & 0xFFFFFFFF}).first()
        if row is None:
            return "a session this user cannot see"
        pid, user, addr, app = row
        return (f"server session {pid} (user {user}" + (f", from {addr}" if addr else "") +
                (f", {app}" if app else "") + ")")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _pg_connection(url: str):
    """An autocommit connection for the advisory lock, named after this process so that a
    worker waiting on it can say who holds it (pg_stat_activity.application_name)."""
    import socket

    import sqlalchemy
    from sqlalchemy.pool import NullPool
    try:
        engine = sqlalchemy.create_engine(url, poolclass=NullPool)
        conn = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        conn.execute(sqlalchemy.text("SELECT set_config('application_name', :n, false)"),
                     {"n": f"autotune on {socket.gethostname()} pid {os.getpid()}"[:63]})
        return conn
    except Exception as exc:  # driver errors: many types, one line for the user
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StorageError(f"storage {redact(url)}: cannot connect for the study lock: "
                           f"{redact_message(first, url)}") from None
