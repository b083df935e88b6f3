"""Folders and files only their owner can read: the results folder, the study database, the
trials' requests and rank logs hold script arguments and log tails, and a shared machine has
other users. Created 0700 and 0600 whatever the umask (a mode given to mkdir or open only loses
bits to the umask, and a folder that lost its owner's write bit would be unusable, hence the
chmod). What already exists keeps its mode: a folder the user made, or another user's, is theirs
to set (`foreign_folder` says when it lets others in).
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from .clean import one_line
from ..errors import AutotuneError

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: str | os.PathLike[str]) -> list[str]:
    """Create `path` and its missing parents 0700; returns the folders created."""
    missing = []
    p = Path(os.path.abspath(path))
    while not os.path.lexists(p):
        missing.append(p)
        p = p.parent
    created = []
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:   # made meanwhile by a concurrent search: theirs is fine
            continue
        os.chmod(folder, DIR_MODE)
        created.append(str(folder))
    return created


def private_file(path: str | os.PathLike[str], *, append: bool = False) -> int:
    """An fd of `path` opened for writing (truncated unless `append`), created 0600; a symlink
    in its place is refused (O_NOFOLLOW), not followed to somebody else's file. A file that
    cannot be opened is one AutotuneError naming it (a planted link at a launch's rank0.log
    was a traceback)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    flags |= os.O_APPEND if append else os.O_TRUNC
    try:
        return os.open(path, flags, FILE_MODE)
    except OSError as exc:
        raise AutotuneError(_unwritable(path, exc)) from None


def _unwritable(path: str | os.PathLike[str], exc: OSError) -> str:
    try:
        st = os.lstat(path)
    except OSError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        return (f"refusing to write {one_line(path)}: it is a symbolic link to "
                f"{one_line(os.readlink(path))} (made by uid {st.st_uid}), and autotune never "
                "follows a link where it writes; remove it, or write to a folder only you can "
                "write (launch: --log-dir, search: --results)")
    return f"cannot write {one_line(path)}: {exc.strerror or exc}; write to another folder"


def create_private(path: str | os.PathLike[str]) -> bool:
    """Create an empty 0600 file at `path` unless something is there; True if created (the
    study's SQLite file: SQLite gives its -wal and -shm files the database's mode)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    except FileExistsError:
        return False
    os.fchmod(fd, FILE_MODE)
    os.close(fd)
    return True


def foreign_folder(path: str | os.PathLike[str]) -> str | None:
    """Why a folder autotune writes private files into still shows them to others (it belongs
    to another user who lets others in, so autotune leaves its mode alone), or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if st.st_uid == os.getuid() or not st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        return None
    return (f"{path} belongs to uid {st.st_uid} and is open to others "
            f"({stat.filemode(st.st_mode)}): autotune does not change the permissions of a "
            "folder it does not own; what it writes inside is 0700/0600, but names are visible")


def autotune_cache() -> Path:
    """Where autotune keeps what it builds once and reuses (the oneCCL module, torch.compile's
    caches): $AUTOTUNE_CACHE, else ~/.cache/autotune."""
    return Path(os.environ.get("AUTOTUNE_CACHE")
                or os.path.join(os.path.expanduser("~"), ".cache", "autotune"))


def untrusted(path: str | os.PathLike[str]) -> str | None:
    """Why loading `path` would run code somebody else can change, or None: it, or a folder
    above it, belongs to another user (not root) or is writable by group or others (a folder
    with the sticky bit owned by root, such as /tmp, protects the names in it and is fine).
    A shared or planted cache folder would otherwise give its writer every rank that loads it."""
    me = os.getuid()
    real = Path(path).resolve()
    for p in (real, *real.parents):
        try:
            st = os.stat(p)
        except OSError as exc:
            return f"{p} cannot be checked ({exc.strerror})"
        if st.st_uid not in (me, 0):
            return f"{p} belongs to uid {st.st_uid}, not to you or root"
        sticky_root = p.is_dir() and st.st_uid == 0 and st.st_mode & stat.S_ISVTX
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky_root:
            return f"{p} is writable by {'others' if st.st_mode & stat.S_IWOTH else 'its group'}"
    return None
