"""The search paths a child of autotune starts with (PYTHONPATH, PATH): the one owner of their
cleaning, for every child environment here and what is forwarded to other hosts (issue 61).

Python reads an empty PYTHONPATH entry as the folder a process starts in (with -P and -c alike),
and a shell or execvp reads an empty or `.` PATH entry the same way: started from /tmp or a
shared scratch folder, a `json.py` or a `numactl` a co-user left there ran as the user in the
probe, every rank, the binding shim and the helpers on every host.
- An empty entry is dropped, silently: `export PYTHONPATH=$PYTHONPATH:/opt/lib` with PYTHONPATH
  unset makes one nobody asked for.
- A relative entry (`.`, `lib`, `~/bin`) is someone's choice, but it means another folder in
  every child that starts elsewhere: a command that starts children refuses it before anything
  starts (relative_entry: one line naming it), and `clean` drops it where one still comes in.

Ground floor, standard library only.
"""
from __future__ import annotations

import os
from typing import Mapping

SEARCH_PATHS = ("PYTHONPATH", "PATH")


def clean(environ: Mapping[str, str]) -> dict[str, str]:
    """A copy of `environ` whose search paths hold absolute entries only (a variable left with
    none is removed)."""
    env = dict(environ)
    for key in SEARCH_PATHS:
        if key in env:
            kept = [p for p in env[key].split(os.pathsep) if os.path.isabs(p)]
            if kept:
                env[key] = os.pathsep.join(kept)
            else:
                del env[key]
    return env


def child_env() -> dict[str, str]:
    """This process's environment, cleaned, for a child started here (os.environ untouched)."""
    return clean(os.environ)


def relative_entry(environ: Mapping[str, str]) -> str | None:
    """One line naming the first relative search-path entry and the rule; None when there is
    none (an empty entry is not one: it is dropped)."""
    for key in SEARCH_PATHS:
        for entry in environ.get(key, "").split(os.pathsep):
            if entry and not os.path.isabs(entry):
                return (f"{key} entry {entry!r}: refused, a relative entry names whatever folder "
                        "a child starts in, which others may write; make it absolute or remove it")
    return None
