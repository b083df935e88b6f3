"""oneCCL's shared-memory segments that outlive their ranks, and their removal (an edge).

oneCCL's shm transport (`CCL_ATL_SHM=1`, which the plan sets) creates `/dev/shm/<pid>:<n>:<m>`
for each rank, 64 MB each, and removes them only when the rank exits cleanly. A rank that is
killed (a timeout, a teardown, Ctrl-C) leaves them behind. With pid_max at 32768 the kernel soon
gives a later rank the same pid, and oneCCL then fails in init_process_group with "failed to
initialize ATL": reproduced here by starting a rank over a stale segment of its own pid (it fails
every time), and seen as a random ccl test failure once a day of tests had left 905 segments
(7.7 GB of /dev/shm).

Which segments are ours is never guessed from the pid in the name: containers that share
/dev/shm (`--ipc=host`) but not the pid namespace name their live segments with pids that do not
exist here, and an earlier version deleted them as "dead". A segment is removed only when a
record says a process of ours mapped it: the runner writes a record per trial before launch
(`SegmentRecord`) and adds each segment it sees a rank map (name and inode, read from
/proc/<pid>/maps while the rank lives). After the trial, or at the next search's start when the
runner was killed with kill -9, a recorded segment whose mapper is gone is removed; nothing else.

A record found in a results folder is data whoever can write that folder wrote (issue 46: a
co-user's record named a file of the user's, `../../home/...`, and a search deleted it). So a
record is read only when it and every folder above it are the user's alone (checked_file.py, on
the file actually opened); a name in it must be a oneCCL segment's (`<pid>:<n>:<m>`, no '/');
and a segment is looked up and removed relative to an fd of /dev/shm, only when it is a plain
file of the user's with the recorded inode. The runner's own record is settled from what it
holds in memory, not read back.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import stat
import time
from pathlib import Path
from typing import Any, Iterable

import psutil

from ...util.checked_file import open_checked
from ...util.checked_folder import CheckedFolder

SHM = Path("/dev/shm")
RECORD = "ccl-segments.json"           # in the trial's folder, under the results folder
_SEGMENT = re.compile(r"^(\d+):\d+:\d+$")


_WATCH_S = 0.25                        # how often /dev/shm is listed while a trial runs
_RECORD_MAX_BYTES = 1 << 20            # thousands of segments; a larger record is not ours


def _pid_in(name: str) -> str | None:
    """The pid a oneCCL segment's name carries (as text), or None for any other file."""
    match = _SEGMENT.fullmatch(name) if isinstance(name, str) else None
    return match.group(1) if match else None


def _namespace() -> dict[str, Any]:
    """Where the pids in a record mean something: this host, pid namespace and user."""
    try:
        pid_ns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        pid_ns = 0
    return {"host": socket.gethostname(), "pid_ns": pid_ns, "uid": os.getuid()}


def _started(pid: int) -> float | None:
    """The process's start time (with its pid, it names one process: pids are reused); None when
    it is gone or a zombie (whose memory, segments included, is already unmapped)."""
    try:
        proc = psutil.Process(pid)
        return None if proc.status() == psutil.STATUS_ZOMBIE else proc.create_time()
    except psutil.Error:
        return None


def mapped_segments(pid: int, root: Path = SHM) -> dict[str, int]:
    """{segment name: inode} of the oneCCL segments under `root` that process `pid` maps."""
    prefix = f"{root}/"
    found: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and parts[5].startswith(prefix):
                    name = parts[5].rstrip("\n").removesuffix(" (deleted)")[len(prefix):]
                    if _pid_in(name) == str(pid):
                        found[name] = int(parts[4])
    except (OSError, ValueError):
        pass
    return found


def named_for(pid: int, root: Path = SHM) -> list[str]:
    """The oneCCL segments under `root` whose name carries `pid`, mapped by anyone or no one. A
    rank started with that pid fails in init_process_group ("fi_enable(endpoint) fails with ret:
    -16, Device or resource busy ... failed to initialize ATL"): worker/fresh_pid.py moves it."""
    try:
        names = os.listdir(root)
    except OSError:
        return []
    return sorted(n for n in names if _pid_in(n) == str(pid))


def remove_own(root: Path = SHM) -> list[str]:
    """Remove the segments this process maps and names with its own pid, as oneCCL would at a
    clean exit: the worker ends with os._exit (gloo's teardown can hang), which skips oneCCL's,
    and on the other hosts of a trial no record removes them (64 MB a rank, every ccl trial)."""
    return _unlink(root, mapped_segments(os.getpid(), root).items())


class SegmentRecord:
    """One trial's record of the oneCCL segments its processes mapped, kept up to date."""

    def __init__(self, folder: CheckedFolder, root: Path = SHM) -> None:
        """The record in a trial's `folder` (checked once by the runner, util/checked_folder.py:
        written through its descriptor, a fresh name renamed over RECORD)."""
        self.folder, self.root = folder, root
        self.data: dict[str, Any] = {**_namespace(), "segments": []}
        self.seen: set[str] = set()
        self.watched_at = 0.0
        self._write()                  # before launch: a kill -9 from here on leaves a record

    def _write(self) -> None:
        self.folder.replace(RECORD, json.dumps(self.data).encode())

    def watch(self, pids: Iterable[int], *, force: bool = False) -> None:
        """Record the segments named after one of `pids` that the process maps right now."""
        if not force and time.monotonic() - self.watched_at < _WATCH_S:
            return
        self.watched_at = time.monotonic()
        wanted = {str(p) for p in pids}
        try:
            names = [n for n in os.listdir(self.root) if n not in self.seen
                     and _pid_in(n) in wanted]
        except OSError:
            return
        added = False
        for pid in {int(n.split(":")[0]) for n in names}:
            started = _started(pid)
            for name, ino in mapped_segments(pid, self.root).items():
                if name not in self.seen and started is not None:
                    self.seen.add(name)
                    self.data["segments"].append({"name": name, "ino": ino, "pid": pid,
                                                  "started": started})
                    added = True
        if added:
            self._write()

    def clean(self) -> list[str]:
        """Settle this trial's segments from what this process recorded (not read back)."""
        gone, live = _settle(self.data["segments"], self.root)
        if not live:
            self.folder.unlink(RECORD)
        return gone


def clean_record(path: Path, root: Path = SHM) -> list[str]:
    """Remove the recorded segments whose process is gone; the record goes when all are settled.
    A record that someone else could have written (its file or a folder above it not the user's
    alone), or from another host, pid namespace or user, is left alone."""
    try:
        with open_checked(str(path)) as record:
            if record.why is not None:
                return []
            data = json.loads(record.read(_RECORD_MAX_BYTES))
            segments = list(data["segments"])
            if {k: data.get(k) for k in ("host", "pid_ns", "uid")} != _namespace():
                return []
            gone, live = _settle(segments, root)
            if not live:   # the name in the folder that was checked, not looked up again
                with contextlib.suppress(OSError):
                    os.unlink(record.name, dir_fd=record.folder_fd)
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return gone


def _settle(segments: list[Any], root: Path) -> tuple[list[str], bool]:
    """Remove the segments whose recorded process is gone: (their names, whether one lives)."""
    dead, live = [], False
    for seg in segments:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            if _started(int(seg["pid"])) == seg["started"]:
                live = True            # its process still runs (another search's trial)
                continue
            dead.append((seg["name"], int(seg["ino"])))
    return _unlink(root, dead), live


def _unlink(root: Path, segments: Iterable[tuple[Any, int]]) -> list[str]:
    """Remove each (name, inode) under `root`, relative to one fd of `root`: a oneCCL segment's
    name only (never a path), a plain file of this user's, and the same inode (a name reused by
    another file is kept)."""
    try:
        folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return []
    gone = []
    try:
        for name, ino in segments:
            if _pid_in(name) is None:
                continue
            with contextlib.suppress(OSError):   # already removed by the rank itself
                st = os.stat(name, dir_fd=folder, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and st.st_ino == ino:
                    os.unlink(name, dir_fd=folder)
                    gone.append(name)
    finally:
        os.close(folder)
    return gone


def clean_recorded(trials_dir: str | os.PathLike[str], root: Path = SHM) -> list[str]:
    """Settle every trial's record under `trials_dir` (a search's start: a runner killed with
    kill -9 left its ranks' segments behind, and their record says which)."""
    gone: list[str] = []
    with contextlib.suppress(OSError):
        for trial in sorted(Path(trials_dir).iterdir()):
            record = trial / RECORD
            if record.is_file() and not record.is_symlink():
                gone += clean_record(record, root)
    return gone


def remove_mapped_by(pids: Iterable[int], kill: Any, root: Path = SHM) -> list[str]:
    """Call `kill()` (which ends `pids`), then remove the segments those processes mapped:
    `remote kill --ccl` on a host of a multi-host trial, where no runner watched the ranks."""
    owned = {pid: (_started(pid), mapped_segments(pid, root)) for pid in pids}
    kill()
    gone = []
    for pid, (started, segments) in owned.items():
        if started is None or _started(pid) == started:
            continue                   # unreadable, or still alive: not ours to remove
        gone += _unlink(root, segments.items())
    return gone
