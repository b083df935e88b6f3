"""Lock files that are safe in a folder other users can write to, and waits with a deadline.

A lock file is opened without following a symbolic link and must be a plain file with one name,
owned by this user (or root) and not writable by all: a link planted by another user would
otherwise make us truncate and write whatever it points to (a victim's ~/.bashrc), and a file of
theirs would make every search of ours fail on its permissions. What is refused is a LockError:
one line, exit 2.

An flock is released by the kernel when its holder dies, but a holder that hangs (stopped, or
stuck on a dead network file system) would make a plain LOCK_EX wait for ever; `wait_flock` gives
up at a deadline and names the holder, read from /proc/locks.

Ground floor: the machine lock (search/), the study lock (search/) and the ccl build lock
(comm/) use it.
"""
from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from typing import NoReturn

from ..errors import LockError

__all__ = ["describe_pid", "flock_holders", "open_lock_file", "printable", "safe_folder",
           "wait_flock"]


def _owner_name(uid: int) -> str:
    import pwd
    try:
        return f"user {pwd.getpwuid(uid).pw_name!r} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _check(st: os.stat_result, path: str, *, folder: bool) -> None:
    """Refuse what another user made or can change; `folder`: a folder only we may write to."""
    kind_ok = stat.S_ISDIR(st.st_mode) if folder else stat.S_ISREG(st.st_mode)
    if not kind_ok:
        raise LockError(f"lock {'folder' if folder else 'file'} {path} is not a plain "
                        f"{'folder' if folder else 'file'}; remove it")
    if st.st_uid not in (os.getuid(), 0):
        raise LockError(f"lock {'folder' if folder else 'file'} {path} belongs to "
                        f"{_owner_name(st.st_uid)}, not to you; autotune does not use another "
                        "user's file as its lock (remove it, or ask its owner to)")
    # A folder only we can write to; a file no one else can (group write is a umask 002
    # default, harmless when the folder is ours).
    if st.st_mode & (0o077 if folder else 0o002):
        raise LockError(f"lock {'folder' if folder else 'file'} {path} can be changed by other "
                        f"users (mode {stat.S_IMODE(st.st_mode):o}); remove it")
    if not folder and st.st_nlink != 1:
        raise LockError(f"lock file {path} has {st.st_nlink} names (a hard link to another "
                        "file?); remove it")


def safe_folder(path: str) -> str:
    """`path`, created 0700 if missing, after checking it is ours alone and not a link."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise LockError(f"cannot create the lock folder {path}: {e.strerror}") from None
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise LockError(f"lock folder {path} is a symbolic link; remove it")
    _check(st, path, folder=True)
    return path


def open_lock_file(path: str, *, mode: int = 0o600) -> int:
    """An fd for flock on `path` (created if missing), never through a link or on a file that is
    not ours. A root-owned file we cannot write is opened read-only (flock needs no more)."""
    flags = os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        try:
            fd = os.open(path, flags | os.O_RDWR, mode)
        except PermissionError:
            fd = os.open(path, flags | os.O_RDONLY, mode)
    except OSError as e:
        _refuse_unopenable(path, e)
    try:
        _check(os.fstat(fd), path, folder=False)
    except LockError:
        os.close(fd)
        raise
    return fd


def _refuse_unopenable(path: str, err: OSError) -> NoReturn:
    """Why `path` could not be opened, as a LockError. A link gives ELOOP, or EACCES where the
    kernel refuses O_CREAT on another user's entry in a sticky folder: say which it is."""
    try:
        st = os.lstat(path)
    except OSError:
        st = None
    if err.errno == errno.ELOOP or (st is not None and stat.S_ISLNK(st.st_mode)):
        raise LockError(f"lock file {path} is a symbolic link; autotune does not follow it "
                        "(someone may be trying to make it overwrite another file); remove "
                        "it") from None
    if st is not None:
        _check(st, path, folder=False)
    raise LockError(f"cannot open the lock file {path}: {err.strerror}") from None


def flock_holders(fd: int) -> list[int]:
    """The pids holding an flock on the file behind `fd` (from /proc/locks; pids of other pid
    namespaces show as 0 or not at all)."""
    st = os.fstat(fd)
    me = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = []
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            for line in f:
                parts = line.split()
                if "->" in parts:        # a waiter, not a holder
                    continue
                if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == me:
                    pids.append(int(parts[4]))
    except (OSError, ValueError):
        pass
    return [p for p in pids if p > 0]


def printable(text: str) -> str:
    """`text` on one line without terminal controls (a holder's command, or what it wrote)."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


def describe_pid(pid: int) -> str:
    """'pid N (user, command, since HH:MM:SS)' as far as this user may read it."""
    import psutil
    try:
        p = psutil.Process(pid)
        with p.oneshot():
            user = p.username()
            # one line whatever the command holds (a `python -c` program has newlines)
            cmd = printable(" ".join(p.cmdline()))[:120] or p.name()
            since = time.strftime("%H:%M:%S", time.localtime(p.create_time()))
        return f"pid {pid} ({user}: {cmd}, since {since})"
    except (psutil.Error, OSError):
        return f"pid {pid}"


def wait_flock(fd: int, *, wait_s: float, what: str) -> None:
    """flock(LOCK_EX) on `fd`, giving up after `wait_s` seconds with a LockError naming `what` and
    who holds it. Polls (LOCK_NB): a blocking flock cannot be given a deadline without a signal."""
    deadline = time.monotonic() + wait_s
    pause = 0.01
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                holders = ", ".join(describe_pid(p) for p in flock_holders(fd)) or \
                    "a process this user cannot see"
                raise LockError(f"{what} has been held for more than {wait_s:g} s by {holders}; "
                                "if that process hangs, end it") from None
            time.sleep(pause)
            pause = min(pause * 2, 0.2)
