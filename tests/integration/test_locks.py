"""Issue 34, items 1 and 7: the locks on a machine shared with other users and other searches.

Real files, real links, a real second user (useradd) planting them, real processes holding the
locks. Each test reproduces what happened before: the victim's file overwritten through a planted
link, another user's file truncated, a traceback, or a wait without end.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from other_user import other_user  # noqa: F401  (the fixture)
from paths import REPO

from autotune.errors import LockError
from autotune.search.lock import MachineLock

VICTIM_TEXT = "export PATH=$HOME/bin:$PATH\n"


@pytest.fixture
def shared():
    """A folder every user may write to, like /tmp (sticky, 1777); pytest's own tmp_path is
    private to root, so it is made in the temporary folder itself."""
    folder = Path(tempfile.mkdtemp(prefix="autotune-test-shared-"))
    os.chmod(folder, 0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def victim_file(tmp_path: Path) -> Path:
    bashrc = tmp_path / "bashrc"
    bashrc.write_text(VICTIM_TEXT)
    return bashrc


def test_a_link_planted_by_another_user_is_refused_and_its_target_untouched(tmp_path, shared,
                                                                            other_user):
    bashrc = victim_file(tmp_path)
    other_user.run("ln", "-s", str(bashrc), str(shared / "autotune-fp.lock"))
    with pytest.raises(LockError, match="is a symbolic link"):
        MachineLock("fp", directory=str(shared)).acquire()
    assert bashrc.read_text() == VICTIM_TEXT       # was: "pid N, since HH:MM:SS"


def test_another_users_lock_file_is_refused_and_left_as_it_is(shared, other_user):
    theirs = shared / "autotune-fp.lock"
    other_user.run("sh", "-c", f"umask 022; echo their-data > {theirs}")
    with pytest.raises(LockError, match=f"belongs to user '{other_user.name}'"):
        MachineLock("fp", directory=str(shared)).acquire()
    assert theirs.read_text() == "their-data\n"    # was: truncated and written over


def test_a_lock_folder_made_by_another_user_is_one_line_and_exit_2(tmp_path, shared,
                                                                   other_user):
    """The per-user folder in a shared temporary folder, made first by someone else: `autotune
    search` says so in one line (exit 2) before any trial, and creates no results folder or study."""
    other_user.run("mkdir", "-m", "0777", str(shared / f"autotune-{os.getuid()}"))
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env.update(TMPDIR=str(shared), PYTHONPATH=str(REPO))
    results = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "autotune", "search", "--budget", "60s",
                           "--results", str(results)], env=env, capture_output=True, text=True,
                          timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(lines) == 1 and f"belongs to user '{other_user.name}'" in lines[0], lines
    # refused before anything is created (the machine lock is taken before the storage)
    assert not results.exists()


HOLD = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    time.sleep(120)
""")


def hold_flock(path: Path) -> subprocess.Popen:
    """Another process holding an flock on `path` (and hanging with it) until killed."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout.readline() == "held\n"
    return holder


def test_a_held_machine_lock_names_its_holder_in_one_line(tmp_path):
    folder = tmp_path / "locks"
    folder.mkdir(mode=0o700)
    holder = hold_flock(folder / "autotune-fp.lock")
    try:
        with pytest.raises(LockError) as err:
            MachineLock("fp", directory=str(folder)).acquire()
    finally:
        holder.kill()
        holder.wait()
    message = str(err.value)
    assert f"pid {holder.pid} (root: " in message and "\n" not in message


# ---- item 7: a lock whose holder hangs is given up at a deadline, naming the holder (every one
# of these waited for ever: a plain flock / pg_advisory_lock)

def test_a_hung_holder_of_a_file_studys_lock_is_named_at_the_deadline(tmp_path):
    from autotune.search.shared import StudyLock
    db = tmp_path / "autotune.db"
    holder = hold_flock(Path(f"{db}.claims.lock"))
    lock = StudyLock(f"sqlite:///{db}", "autotune-x", wait_s=1)
    try:
        with pytest.raises(LockError) as err:
            with lock.held():
                pass
    finally:
        holder.kill()
        holder.wait()
        lock.close()
    assert f"the study lock of autotune-x ({db}.claims.lock) has been held for more than 1 s " \
           f"by pid {holder.pid} (root: " in str(err.value)


PG_HOLD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {repo!r})
    from autotune.search.shared import StudyLock
    with StudyLock({url!r}, "autotune-x").held():
        print("held", flush=True)
        time.sleep(120)
""")


def test_a_hung_holder_of_the_postgres_study_lock_is_named_at_the_deadline():
    from pg_server import postgres_server

    from autotune.search.shared import StudyLock
    with postgres_server() as url:
        holder = subprocess.Popen([sys.executable, "-c", PG_HOLD.format(repo=str(REPO), url=url)],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline() == "held\n"
            lock = StudyLock(url, "autotune-x", wait_s=1)
            with pytest.raises(LockError) as err:
                with lock.held():
                    pass
            lock.close()
        finally:
            holder.kill()
            holder.wait()
    message = str(err.value)
    assert "the study lock of autotune-x has been held for more than 1 s by server session " \
           "" in message, message
    assert f"pid {holder.pid})" in message and "pg_terminate_backend" in message, message


def test_a_hung_holder_of_the_ccl_build_lock_is_named_at_the_deadline():
    import importlib
    ccl_build = importlib.import_module("autotune.comm.ccl.build")   # the package's `build` is
                                                                     # the function
    if ccl_build.runtime_problem():
        pytest.skip(f"no oneCCL runtime: {ccl_build.runtime_problem()}")
    folder = ccl_build.cache_root() / ccl_build.cache_key()
    folder.mkdir(parents=True, exist_ok=True)
    holder = hold_flock(folder / ".lock")
    try:
        with pytest.raises(LockError) as err:
            ccl_build.build(wait_s=1, log=lambda *_: None)
    finally:
        holder.kill()
        holder.wait()
    assert f"the ccl build lock {folder / '.lock'} has been held for more than 1 s by pid " \
           f"{holder.pid}" in str(err.value)
