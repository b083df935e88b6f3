"""A folder only this user can change, reached once and then used only through its descriptor:
a trial's folder, where the runner and its ranks leave each other requests, results and logs.

A name looked up again can lead elsewhere (issue 52): a co-user who could rename a folder above
`trials/` moved it aside, made their own `trials/<id>/`, and from then on the runner and the
ranks read and wrote their files: a link at a rank's temporary file overwrote a file of the
user's, a planted result entered the study, a FIFO hung the search. So the folder is reached once
by the walk of checked_file.py (from /, no link followed by name, every folder on the way judged:
nobody else may rename or replace anything on it), must be this user's, not a link and closed to
everyone else (0700), and every file in it is opened relative to the kept descriptor:
- created with O_EXCL | O_NOFOLLOW: a link or file planted at the name fails the create and is
  never followed or reused; a file written whole goes to a fresh random name first and is then
  renamed over its target (which replaces whatever was planted there, without following it);
- read with O_NOFOLLOW | O_NONBLOCK (a FIFO blocks a plain open until someone writes), and used
  only when it is a plain file of this user's, up to a size cap (a link to /dev/zero was read
  until memory ran out).

Ground floor, standard library only: the ranks import it, and a host of a search across hosts
reaches a shared trial folder by its path and checks it the same way.
"""
from __future__ import annotations

import errno
import os
import secrets
import stat
from dataclasses import dataclass

from ..errors import AutotuneError
from .checked_file import owner_name, walk_to_folder

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class FolderRefused(AutotuneError):
    """Someone else could change the folder, or rename a folder above it."""


class NotOurs(Exception):
    """A file in a checked folder that is not a plain file of this user's within the cap."""

    def __init__(self, why: str, ident: tuple[int, ...]) -> None:
        super().__init__(why)
        self.why, self.ident = why, ident


@dataclass(frozen=True)
class Found:
    data: bytes
    ident: tuple[int, ...]     # (device, inode, size, mtime): the same file read again has it


def _ident(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class CheckedFolder:
    """An open folder, checked once; its files are reached only relative to it."""

    def __init__(self, fd: int, path: str) -> None:
        self.fd, self.path = fd, path
        self.me = os.geteuid()

    @classmethod
    def open(cls, path: str, *, create: bool = False) -> "CheckedFolder":
        """The folder at `path`, reached by the walk (a link on the way is followed when its
        folder is safe); FolderRefused when someone else could change it or a folder above it.
        `create`: missing folders are made 0700, only while nothing on the way is refused."""
        try:
            fd, shown, why = walk_to_folder(os.path.abspath(path), create=create)
        except OSError as exc:
            raise FolderRefused(f"cannot open the folder {path}: {exc.strerror or exc}") from None
        if why is not None:
            os.close(fd)
            raise FolderRefused(f"{shown}: {why}")
        return cls(fd, shown)

    def child(self, name: str, *, create: bool) -> "CheckedFolder":
        """A folder in this one that is this user's, not a link, and closed to everyone else
        (`create`: made 0700 when missing)."""
        shown = os.path.join(self.path, name)
        made = False
        if create:
            try:
                os.mkdir(name, 0o700, dir_fd=self.fd)
                made = True
            except FileExistsError:
                pass
        try:
            fd = os.open(name, _FOLDER, dir_fd=self.fd)
        except OSError as exc:
            link = exc.errno in (errno.ELOOP, errno.ENOTDIR)
            raise FolderRefused(f"{shown}: " + ("not a folder (a link or a file in its place)"
                                                if link else exc.strerror or str(exc))) from None
        if made:   # 0700 whatever the umask took
            os.fchmod(fd, 0o700)
        st = os.fstat(fd)
        why = None
        if st.st_uid != self.me:
            why = f"belongs to {owner_name(st.st_uid)}, not to you (uid {self.me})"
        elif st.st_mode & 0o077:
            why = (f"others have access to it (mode {stat.S_IMODE(st.st_mode):o}); "
                   "a trial's folder is 0700")
        if why:
            os.close(fd)
            raise FolderRefused(f"{shown}: {why}")
        return CheckedFolder(fd, shown)

    @property
    def identity(self) -> str:
        """'device:inode' of the folder: a process given it checks it reached the same one."""
        st = os.fstat(self.fd)
        return f"{st.st_dev}:{st.st_ino}"

    def name_of(self, path: str) -> str:
        """The name in this folder of `path` (a path the plan gave), which must be directly in
        it: nothing of a trial is reached by another path."""
        folder, name = os.path.split(os.path.abspath(path))
        if os.path.normpath(folder) != os.path.normpath(self.path) or not name:
            raise ValueError(f"{path} is not directly in the trial folder {self.path}")
        return name

    def create(self, name: str) -> int:
        """A new 0600 file, open for writing; FileExistsError when anything has the name."""
        fd = os.open(name, _CREATE, 0o600, dir_fd=self.fd)
        os.fchmod(fd, 0o600)
        return fd

    def replace(self, name: str, data: bytes) -> None:
        """Write `data` whole under `name`: a reader sees the old file or the new one, and
        whatever was at the name (a planted file or link) is replaced, not followed."""
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        fd = self.create(tmp)
        try:
            with open(fd, "wb", closefd=True) as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            self.unlink(tmp)
            raise

    def read(self, name: str, limit: int, *, private: bool = False) -> Found | None:
        """The file's bytes (None: nothing has the name); NotOurs when it is not a plain file
        of this user's of at most `limit` bytes (`private`: nor one others may read or write)."""
        try:
            fd = os.open(name, _READ, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            why = "a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
            raise NotOurs(f"{name}: {why}", self._lident(name)) from None
        try:
            st = os.fstat(fd)
            ident = _ident(st)
            if not stat.S_ISREG(st.st_mode):
                raise NotOurs(f"{name}: not a plain file ({stat.filemode(st.st_mode)})", ident)
            if st.st_uid != self.me:
                raise NotOurs(f"{name}: belongs to {owner_name(st.st_uid)}", ident)
            if private and st.st_mode & 0o077:
                raise NotOurs(f"{name}: others have access to it (mode "
                              f"{stat.S_IMODE(st.st_mode):o}, not 600)", ident)
            data = os.pread(fd, limit + 1, 0)
            if len(data) > limit:
                raise NotOurs(f"{name}: larger than {limit} bytes", ident)
            return Found(data, ident)
        finally:
            os.close(fd)

    def tail(self, name: str, nbytes: int) -> bytes:
        """The last `nbytes` of a plain file of this user's ("" for anything else)."""
        try:
            fd = os.open(name, _READ, dir_fd=self.fd)
        except OSError:
            return b""
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != self.me:
                return b""
            return os.pread(fd, nbytes, max(0, st.st_size - nbytes))
        finally:
            os.close(fd)

    def size(self, name: str) -> int:
        """Bytes in the plain file `name` (0 for anything else, or nothing)."""
        st = self._lstat(name)
        return st.st_size if st is not None and stat.S_ISREG(st.st_mode) else 0

    def exists(self, name: str) -> bool:
        return self._lstat(name) is not None

    def unlink(self, name: str) -> None:
        """Remove the entry `name` (a planted link is removed, never followed)."""
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            pass

    def _lstat(self, name: str) -> os.stat_result | None:
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except OSError:
            return None

    def _lident(self, name: str) -> tuple[int, ...]:
        st = self._lstat(name)
        return _ident(st) if st is not None else (0, 0, 0, 0)

    def close(self) -> None:
        """Close the descriptor, once: a number closed twice may by then be another file's."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "CheckedFolder":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


def open_private(path: str, *, create: bool = False,
                 identity: str | None = None) -> CheckedFolder:
    """A trial's folder: the folder above it reached by the walk (nobody else may rename what is
    on the way), then the folder itself as `CheckedFolder.child` checks it. `identity`: the
    device:inode the caller must find (what the runner checked, for a rank it started)."""
    above, name = os.path.split(os.path.abspath(path))
    with CheckedFolder.open(above, create=create) as parent:
        folder = parent.child(name, create=create)
    if identity is not None and folder.identity != identity:
        shown = folder.path
        folder.close()
        raise FolderRefused(f"{shown} is not the folder the runner checked (it was replaced)")
    return folder
