"""A study as someone else could have written it (issue 34): a finished study (results_study)
whose stored strings carry control characters and commands, written through Optuna's public API
exactly as anyone with write access to a shared storage could write them."""
from __future__ import annotations

import os
import pwd
import re
import subprocess
from pathlib import Path

import optuna

from results_study import study_copy

ESC = "\x1b]0;owned\x07\x1b[2J"   # sets the terminal's title, clears the screen


def open_only(db: Path) -> optuna.Study:
    return optuna.load_study(study_name=None, storage=f"sqlite:///{db}")


def inject(db: Path, marker: Path, *, command: list[str] | None = None,
           backend: str | None = None, machine: bool = True) -> None:
    """Every string the exports, the report and the summaries show from the study, each with a
    newline followed by `touch MARKER.field` (and a terminal escape): run as shell, any of them
    leaves a file behind. `command`: a stored script command (script mode); `machine` False
    leaves the machine and torch alone (launch and verify refuse another machine or torch for
    that alone, and would never reach the stored command)."""
    study = open_only(db)
    attrs = study.user_attrs

    def evil(field: str) -> str:
        return f"{field}{ESC}\ntouch {marker}.{field}\n"
    rec = dict(attrs["recommendation"], headline=evil("headline"))
    if backend:
        rec["config"] = dict(rec["config"], backend=backend)
    study.set_user_attr("recommendation", rec)
    if machine:
        topo = dict(attrs["topology"])
        topo["isa"] = dict(topo["isa"], model_name=evil("machine"))
        study.set_user_attr("topology", topo)
        study.set_user_attr("library_versions", dict(attrs["library_versions"],
                                                     torch=evil("torch")))
    if command is not None:
        study.set_user_attr("script_command", command)
        study.set_user_attr("script_overrides", {"threads": evil("override")})


def hostile_copy(folder: Path, marker: Path, **kw) -> Path:
    db = study_copy(folder)
    inject(db, marker, **kw)
    return db


def other_user(name: str = "atk34") -> pwd.struct_passwd:
    """A real second account (created once; kept, as the system's own accounts are)."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        name], check=True, capture_output=True, timeout=60)
        return pwd.getpwnam(name)


def give_to(folder: Path, user: pwd.struct_passwd) -> None:
    """`folder` and everything in it now belongs to `user`, as if that user had written it."""
    for root, dirs, files in os.walk(folder):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.chown(name, user.pw_uid, user.pw_gid)


def shown_hash(refusal: str) -> str:
    """The hash a refusal printed for --trust-study (issue 46: it accepts what was shown)."""
    found = re.findall(r"add --trust-study ([0-9a-f]{12})", refusal)
    assert len(set(found)) == 1, refusal
    return found[0]
