"""Open a file and say whether only this user can change it, asked of the file actually opened
and of every folder above it (ground floor: the study's trust, launch manifests, oneCCL records).

A name looked up twice can lead to two files: a co-user who can rename a folder on the way swaps
it between a check and a read (issue 46 ran a planted command that way). So the path is walked
from / one entry at a time, each opened without following a link by name (O_PATH | O_NOFOLLOW)
and fstat'ed; a link is read and followed here, judged by its owner like any entry; the file is
reopened from the fd the walk ended on. The caller reads through the returned handle, or by a
path through the folder fd the walk checked (`in_folder`), never by the name again.

Who can change a file: its owner, root, and whoever can write a folder on the way (they can put
another file or folder in its place). So the file must be this user's and writable by no one
else; every folder above it must be this user's or root's and writable by no one else, except a
sticky folder (/tmp), where only an entry's owner may rename or remove it: the entry taken there
must then be this user's or root's. With `private_folder`, the file's own folder may not be
writable by others at all, sticky or not (SQLite creates its side files beside the database).
"""
from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass

_MAX_LINKS = 40                              # as the kernel's limit on links in one lookup
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
_WALK = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


def owner_name(uid: int) -> str:
    """'uid 1001 (alice)', or 'uid 1001' for a uid with no account here."""
    import pwd
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


@dataclass
class CheckedFile:
    """An open file, the folder it was found in, and whether only this user can change it."""
    path: str                 # as the walk found it (links resolved), for messages
    fd: int                   # the file, open for reading
    folder_fd: int            # the folder it is in (O_PATH), checked with it
    name: str                 # its name in that folder
    owner: int                # the file's uid (fstat)
    why: str | None           # None: only this user (or root) can change it; else why not

    def in_folder(self, suffix: str = "") -> str:
        """A path to the file (or `name + suffix` beside it) through the checked folder's fd:
        the same folder, whatever its name is now."""
        return f"/proc/self/fd/{self.folder_fd}/{self.name}{suffix}"

    def read(self, limit: int) -> bytes:
        """At most `limit` bytes of the file, from its start (ValueError when it holds more)."""
        data = os.pread(self.fd, limit + 1, 0)
        if len(data) > limit:
            raise ValueError(f"{self.path} is larger than {limit} bytes")
        return data

    def close(self) -> None:
        """Close both fds, once: a number closed twice may by then be another file's."""
        for fd in (self.fd, self.folder_fd):
            if fd >= 0:
                os.close(fd)
        self.fd = self.folder_fd = -1

    def close_file(self) -> None:
        """Close the file's own fd and keep the folder's (read through `in_folder`)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "CheckedFile":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


def open_checked(path: str, *, private_folder: bool = False,
                 side_suffixes: tuple[str, ...] = ()) -> CheckedFile:
    """Open the regular file at `path` for reading by walking to it (OSError when it cannot be
    reached or is not a plain file) and judge it, its `side_suffixes` files and every folder on
    the way."""
    walk = _Walk(os.geteuid())
    try:
        fd, folder, name, shown = walk.to_file(os.path.abspath(path))
    except BaseException:
        walk.close()
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{shown} is not a plain file")
        readable = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(fd)
    why = walk.why or _file_why(st, shown, walk.me)
    folder_st = os.fstat(folder)
    if why is None and private_folder and folder_st.st_mode & _OTHERS_WRITE:
        why = (f"its folder {os.path.dirname(shown)} can be written by other users (mode "
               f"{stat.S_IMODE(folder_st.st_mode):o}), who may add the files read beside it")
    for suffix in side_suffixes:
        why = why or _side_why(folder, name + suffix, os.path.dirname(shown), walk.me)
    walk.close(keep=folder)
    return CheckedFile(path=shown, fd=readable, folder_fd=folder, name=name, owner=st.st_uid,
                       why=why)


def walk_to_folder(path: str, *, create: bool = False) -> tuple[int, str, str | None]:
    """(an O_PATH fd of the folder at `path` reached by the walk, its path as walked, why someone
    else could change it or a folder above it, or None). `create`: missing folders are made
    0700 on the way, while nothing is refused (checked_folder.py)."""
    walk = _Walk(os.geteuid())
    try:
        fd, shown = walk.to_folder(path, create=create)
    except BaseException:
        walk.close()
        raise
    walk.close(keep=fd)
    return fd, shown, walk.why


def renamable(path: str) -> str | None:
    """Why someone other than this user (or root) could rename or replace the folder `path` or
    a folder above it, or None. What does not exist yet is judged by the folders that do (what
    autotune makes below them is 0700). OSError when the walk meets a file or a loop."""
    walk = _Walk(os.geteuid())
    try:
        walk.to_folder(os.path.abspath(path), create=False, stop_at_missing=True)
        return walk.why
    finally:
        walk.close()


class _Walk:
    """The folders from / to the file, each an O_PATH fd with its stat, and the first reason
    found on the way that someone else could change what the walk reaches."""

    def __init__(self, me: int) -> None:
        self.me, self.why, self.links = me, None, 0
        self.stack: list[tuple[int, os.stat_result, str]] = []
        self._root()

    def _root(self) -> None:
        self.close()
        fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        self.stack = [(fd, os.fstat(fd), "/")]
        self._judge_folder(self.stack[0][1], "/")

    def to_file(self, path: str) -> tuple[int, int, str, str]:
        """(file's O_PATH fd, its folder's fd, its name, its path as walked)."""
        todo = [p for p in path.split("/") if p]
        while todo:
            name = todo.pop(0)
            if name == "." or self._up(name):
                continue
            folder, folder_st, where = self.stack[-1]
            fd = os.open(name, _WALK, dir_fd=folder)
            st = os.fstat(fd)
            shown = os.path.join(where, name)
            self._judge_entry(folder_st, where, st, shown)
            if stat.S_ISLNK(st.st_mode):
                os.close(fd)
                todo = self._follow(name, folder) + todo
            elif todo:
                self._enter(fd, st, shown)
            else:
                return fd, folder, name, shown
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)

    def to_folder(self, path: str, *, create: bool, stop_at_missing: bool = False
                  ) -> tuple[int, str]:
        """(the folder's O_PATH fd, its path as walked), the folder then on top of the stack.
        With `create`, a missing folder is made 0700 relative to the one above, but only while
        nothing on the way could be changed by someone else (a refusal writes nothing);
        `stop_at_missing`: the walk ends at the deepest folder that exists."""
        todo = [p for p in path.split("/") if p]
        while todo:
            name = todo.pop(0)
            if name == "." or self._up(name):
                continue
            folder, folder_st, where = self.stack[-1]
            shown = os.path.join(where, name)
            try:
                fd = os.open(name, _WALK, dir_fd=folder)
            except FileNotFoundError:
                if stop_at_missing or (create and self.why is not None):
                    break    # (refused: the caller says why, and nothing is made)
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):   # made meanwhile: judged below
                    os.mkdir(name, 0o700, dir_fd=folder)
                fd = os.open(name, _WALK, dir_fd=folder)
                if os.fstat(fd).st_uid == self.me:   # 0700 whatever the umask
                    os.chmod(f"/proc/self/fd/{fd}", 0o700)
            st = os.fstat(fd)
            self._judge_entry(folder_st, where, st, shown)
            if stat.S_ISLNK(st.st_mode):
                os.close(fd)
                todo = self._follow(name, folder) + todo
            else:
                self._enter(fd, st, shown)
        return self.stack[-1][0], self.stack[-1][2]

    def _up(self, name: str) -> bool:
        if name != "..":
            return False
        if len(self.stack) > 1:
            os.close(self.stack.pop()[0])
        return True

    def _enter(self, fd: int, st: os.stat_result, shown: str) -> None:
        if not stat.S_ISDIR(st.st_mode):
            os.close(fd)
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), shown)
        self._judge_folder(st, shown)
        self.stack.append((fd, st, shown))

    def _follow(self, name: str, folder: int) -> list[str]:
        # Read by name in a folder the walk already judged: only its writers (judged above)
        # can change the link between the open and this read.
        self.links += 1
        if self.links > _MAX_LINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name)
        target = os.readlink(name, dir_fd=folder)
        if target.startswith("/"):
            self._root()
        return [p for p in target.split("/") if p]

    def _judge_folder(self, st: os.stat_result, shown: str) -> None:
        if self.why is not None:
            return
        if st.st_uid not in (self.me, 0):
            self.why = (f"the folder {shown} above it belongs to {owner_name(st.st_uid)}, not to "
                        f"you (uid {self.me}) or root")
        elif st.st_mode & _OTHERS_WRITE and not st.st_mode & stat.S_ISVTX:
            self.why = (f"the folder {shown} above it can be written by other users (mode "
                        f"{stat.S_IMODE(st.st_mode):o}), who may put another in its place")

    def _judge_entry(self, folder_st: os.stat_result, where: str, st: os.stat_result,
                     shown: str) -> None:
        # In a sticky folder others can write, an entry is safe only when it is ours or root's.
        shared = folder_st.st_mode & _OTHERS_WRITE and folder_st.st_mode & stat.S_ISVTX
        if self.why is None and shared and st.st_uid not in (self.me, 0):
            self.why = (f"{shown} in the shared folder {where} belongs to "
                        f"{owner_name(st.st_uid)}, not to you (uid {self.me}) or root")

    def close(self, keep: int | None = None) -> None:
        for fd, _st, _where in self.stack:
            if fd != keep:
                os.close(fd)
        self.stack = []


def _file_why(st: os.stat_result, shown: str, me: int) -> str | None:
    if st.st_uid != me:
        return f"{shown} belongs to {owner_name(st.st_uid)}, not to you (uid {me})"
    if st.st_mode & _OTHERS_WRITE:
        return f"{shown} can be written by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _side_why(folder: int, name: str, where: str, me: int) -> str | None:
    """A file the reader opens beside the checked one (SQLite's -wal, -shm, -journal)."""
    try:
        st = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    shown = os.path.join(where, name)
    if stat.S_ISLNK(st.st_mode):
        return f"{shown} is a symbolic link ({owner_name(st.st_uid)})"
    return _file_why(st, shown, me)
