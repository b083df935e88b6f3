"""What each host says of itself before a search across hosts starts (run/remote.probe_cluster):
its clock, its Python and its autotune, which decide whether launches are kept there between
trials (plan/hosts.kept_refusal), and whether it reaches the results folder, which every host
must (refused in one line, exit 2, before any trial).

The results folder is judged by what each host finds in it: the runner writes a file of a
fresh random content into `trials/` (through its checked folder), and each host must reach a
folder at the same path, its own user's (not another uid's: a shared file system that maps the
user to another uid there, or an ssh login as someone else), that holds that very file. A path
that exists on every host but is each host's own disk would otherwise run every trial there
against a folder the runner never reads.

`python -m autotune.run.remote facts [FOLDER NAME CONTENT]` is the host's side (one JSON line).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import secrets
import time
from pathlib import Path
from typing import Any

from ..errors import AutotuneError
from ..plan.cluster import Cluster
from ..util.checked_file import owner_name
from ..util.checked_folder import CheckedFolder, FolderRefused, NotOurs
from ..util.child_python import python_module

_MARK_BYTES = 64


def source_digest() -> str:
    """A digest of this autotune's Python sources: the same version number can be other code
    (a checkout with changes, an older copy on one host)."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        with contextlib.suppress(OSError):
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def facts_here(reach: tuple[str, str, str] | None = None) -> dict[str, Any]:
    """This host's facts; `reach` (folder, name, content): whether the folder is reached."""
    from .. import __version__
    out: dict[str, Any] = {"time": time.time(), "python": platform.python_version(),
                           "autotune": __version__, "digest": source_digest(),
                           "uid": os.geteuid()}
    if reach is not None:
        out["folder"] = reached(*reach)
    return out


def reached(folder: str, name: str, content: str) -> str:
    """"" when this host reaches the runner's `folder` (its file `name` holds `content`), else
    what it finds there instead."""
    me = os.geteuid()
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        return f"{folder} does not exist there"
    except OSError as exc:
        return f"{folder} cannot be reached there ({exc.strerror or exc})"
    if st.st_uid != me:
        return (f"{folder} belongs to {owner_name(st.st_uid)} there, and autotune runs there as "
                f"{owner_name(me)}")
    try:
        with CheckedFolder.open(folder) as opened:
            found = opened.read(name, _MARK_BYTES)
    except FolderRefused as exc:
        return str(exc)
    except NotOurs as exc:
        return f"{folder}: {exc.why}"
    if found is None or found.data.decode("ascii", "replace") != content:
        return (f"{folder} there is another folder than this machine's (the file autotune just "
                "wrote in it is not there)")
    return ""


def gather(cluster: Cluster, run_on, results_folder: str | None) -> dict[str, dict[str, Any]]:
    """Every host's facts, in host order, each with `offset`: how far its clock is at least
    from this machine's (0 when its time fell within the call). `results_folder`: the trials
    folder every host must reach (its file removed afterwards). `run_on(cluster, host, *argv)`
    runs a command there (run/remote.run_on)."""
    mark = None
    if results_folder is not None:
        mark = _write_mark(results_folder)
    try:
        out = {}
        for h in cluster.hosts:
            before = time.time()
            try:
                text = run_on(cluster, h.name, *python_module(
                    "autotune.run.remote", "facts", *(mark[1:] if mark else ()),
                    python=cluster.python))
            except AutotuneError as exc:   # an autotune there without this command
                if "usage: python -m autotune.run.remote" not in str(exc):
                    raise
                out[h.name] = {"autotune": "of another version (it has no facts command)"}
                continue
            after = time.time()
            facts = _parse(h.name, text)
            at = float(facts.get("time", before))
            facts["offset"] = at - after if at > after else at - before if at < before else 0.0
            out[h.name] = facts
        return out
    finally:
        if mark is not None:
            mark[0].unlink(mark[2])
            mark[0].close()


def _write_mark(folder: str) -> tuple[CheckedFolder, str, str, str]:
    """(the trials folder, its path, the new file's name, its content)."""
    opened = CheckedFolder.open(folder, create=True)
    name, content = f".reach-{secrets.token_hex(6)}", secrets.token_hex(16)
    try:
        fd = opened.create(name)
        with open(fd, "w", closefd=True) as f:
            f.write(content)
    except BaseException:
        opened.close()
        raise
    return opened, os.path.abspath(folder), name, content


def _parse(host: str, text: str) -> dict[str, Any]:
    try:
        facts = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        facts = None
    if not isinstance(facts, dict):
        raise AutotuneError(f"host {host}: `autotune.run.remote facts` printed no JSON: "
                            f"{text.strip()[-200:]!r}")
    return facts
