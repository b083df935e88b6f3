"""A throwaway PostgreSQL server for the shared-search tests: Debian's `postgresql` binaries,
a fresh cluster in a temporary folder, listening only on a unix socket in that folder (no TCP
port to collide with another test run or a system server), stopped and removed afterwards.

PostgreSQL refuses to run as root, so as root (CI) the cluster belongs to the `postgres` user
the Debian package creates, and initdb/pg_ctl run as that user through runuser. setup.sh --test
installs the package; without it (a developer machine) the tests skip, except under CI.

To try a shared search by hand: `python tests/pg_server.py` starts one, prints its URL and keeps
it until Ctrl-C (then stops and removes it).
"""
from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from typing import Iterator

import pytest


def _bindir() -> str | None:
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                  key=lambda d: int(d.split("/")[-2]) if d.split("/")[-2].isdigit() else 0)
    return next((d for d in reversed(dirs) if os.path.exists(os.path.join(d, "initdb"))), None)


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """Yields a SQLAlchemy URL of an empty database `autotune` on a fresh server."""
    bindir = _bindir()
    if bindir is None:
        message = "PostgreSQL server binaries not found (apt-get install postgresql; setup.sh --test)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")
    # Not under pytest's tmp_path: that is private to root (0700), and the server runs as postgres.
    root = tempfile.mkdtemp(prefix="autotune-pg-")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    data, log = os.path.join(root, "data"), os.path.join(root, "server.log")

    def run(*argv: str) -> None:
        done = subprocess.run(_as_server_user([os.path.join(bindir, argv[0]), *argv[1:]]),
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({done.returncode}): {done.stderr[-2000:]}")

    started = False
    try:
        run("initdb", "-D", data, "--auth=trust", "-U", "autotune", "-E", "UTF8", "--no-sync")
        # fsync off: a test database need not survive a power cut, and fsyncs slow a shared box
        run("pg_ctl", "-D", data, "-l", log, "-w", "-t", "60", "-o",
            f"-c listen_addresses= -k {root} -c fsync=off -c max_connections=50", "start")
        started = True
        run("createdb", "-h", root, "-U", "autotune", "autotune")
        yield f"postgresql://autotune@/autotune?host={root}"
    finally:
        if started:
            subprocess.run(_as_server_user([os.path.join(bindir, "pg_ctl"), "-D", data, "-m",
                                            "immediate", "-w", "stop"]),
                           capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    import signal
    import sys
    # Ctrl-C or SIGTERM end the wait and so run the clean-up (also when started in background,
    # where a shell leaves SIGINT ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with postgres_server() as url:
        print(f"PostgreSQL for autotune: --storage '{url}'  (Ctrl-C stops it)", flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
