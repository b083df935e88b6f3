"""The trial folders under the results folder (`trials/<id>/`: the request, the rank logs and
results), settled when a search starts: what a runner killed with kill -9 left in /dev/shm is
removed (comm/ccl/shm.py), and the folders are kept to the newest N. Every trial leaves a folder
of up to 65 MiB per rank (run/tee.py caps the logs), and a search started every night on a shared
machine must not fill its disk.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat

import psutil

from ..comm.ccl.shm import RECORD, clean_recorded
from ..util.checked_file import renamable
from ..util.checked_folder import FolderRefused
from ..util.clean import one_line

DEFAULT_KEEP = 200   # folders; `--keep-trials all` keeps every one


def trials_folder(results_dir: str) -> str:
    """Where a results folder keeps its trials."""
    return os.path.join(results_dir, "trials")


def check_results(results_dir: str) -> None:
    """Refuse, in one line with the fix, a results folder where someone else could rename or
    replace a folder on the way to its trials (it, or one above it): they could move `trials/`
    aside and put their own trial folders in its place, which the ranks of a running launch
    would then read and write (issue 52). Asked before anything is written; the runner checks
    each trial folder again when it opens it (run/trial_files.py)."""
    _refuse_a_link(results_dir)
    try:
        why = renamable(trials_folder(results_dir))
    except OSError as exc:
        why = f"it cannot be walked to ({exc.strerror or exc})"
    if why is None:
        return
    fix = ""
    if (m := re.search(r"the folder (.+) above it can be written by other users", why)):
        fix = f"remove the others' write access (chmod go-w {m.group(1)}), or "
    raise FolderRefused(
        f"--results {one_line(results_dir)}: someone else could move its trial folders aside "
        f"and put their own in their place: {one_line(why)}; {fix}give --results a folder only "
        "you can write, all the way up (such as ~/autotune-results); nothing was written")


def _refuse_a_link(results_dir: str) -> None:
    """Refuse a results folder reached through a symbolic link: the runner and every rank reach
    a trial's files through the folder they walked to (its real path) and accept only the paths
    the plan gave directly in it, so a plan made of the link's path failed every trial."""
    if (link := _first_link(trials_folder(results_dir))) is None:
        return
    trials = os.path.abspath(trials_folder(results_dir))
    fix = ("put a folder in its place" if link[0] == trials else
           f"give --results {one_line(os.path.realpath(results_dir))}, the real folder")
    raise FolderRefused(
        f"--results {one_line(results_dir)}: {one_line(link[0])} is a symbolic link (to "
        f"{one_line(link[1])}); a trial's files are reached by their real path only: {fix}; "
        "nothing was written")


def _first_link(path: str) -> tuple[str, str] | None:
    """(the first symbolic link on the way to `path`, its target), or None; what does not exist
    yet ends the search."""
    walked = "/"
    for part in os.path.abspath(path).split("/"):
        walked = os.path.join(walked, part)
        try:
            if stat.S_ISLNK(os.lstat(walked).st_mode):
                return walked, os.readlink(walked)
        except FileNotFoundError:
            return None
    return None


def settle(trials_dir: str, keep: int | None = DEFAULT_KEEP) -> list[str]:
    """Clean the oneCCL records, then prune to the newest `keep` folders (None: all); returns
    the folders removed."""
    clean_recorded(trials_dir)
    return prune(trials_dir, keep)


def prune(trials_dir: str, keep: int | None) -> list[str]:
    """Remove the trial folders older than the newest `keep` (by last change). One that a live
    process still writes to (a concurrent search's running trial) or that holds a oneCCL record
    not yet settled stays; so does anything that is not a plain folder (a symlink is not
    followed)."""
    if keep is None:
        return []
    try:
        folders = [e for e in os.scandir(trials_dir) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    folders.sort(key=lambda e: e.stat(follow_symlinks=False).st_mtime, reverse=True)
    old = folders[keep:]
    if not old:
        return []
    busy = _in_use(trials_dir)
    gone = []
    for entry in old:
        path = os.path.realpath(entry.path)
        if path in busy or os.path.lexists(os.path.join(entry.path, RECORD)):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)   # fd-based: safe against symlink swaps
        gone.append(entry.name)
    return gone


def _in_use(trials_dir: str) -> set[str]:
    """The trial folders under `trials_dir` named by a live process's AUTOTUNE_RESULT."""
    root = os.path.join(os.path.realpath(trials_dir), "")
    busy = set()
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            marker = proc.environ().get("AUTOTUNE_RESULT")
            if marker and os.path.realpath(marker).startswith(root):
                rest = os.path.realpath(marker)[len(root):]
                busy.add(os.path.join(root, rest.split(os.sep)[0]))
    return busy
