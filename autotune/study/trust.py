"""A study is data, never code, until a person says so.

A study can hold things that run: the user's script command (script mode), a `module:function`
workload that the trials import, and the library paths of the machine it measured, which an
export turns into LD_PRELOAD. Whoever can write the storage can change them: on a shared
PostgreSQL study, any worker's account; on a file, whoever can write the file or its folder.
So `verify` and `launch` run a stored command only from a storage that provably only this user
can write (a study this user created, in a folder of theirs); from any other, they print the
exact command and refuse until the person who read it adds --trust-study (or gives their own
command after `--`). Library paths must be the ones this machine's own probe finds.

Why not trust "the user who created the study" as the study records it: that record is itself
data in the storage, writable by the same people. File ownership and mode are kept by the kernel.
"""
from __future__ import annotations

import os
import shlex
import stat
from typing import Any, Iterable

from ..clean import one_line
from ..errors import ConfigError

TRUST_FLAG = "--trust-study"
_SQLITE_SIDE_FILES = ("", "-wal", "-shm", "-journal")   # SQLite reads all of them as the study


def storage_file(url: str) -> str | None:
    """The file an SQLite or journal URL names (None for a database server)."""
    for scheme in ("sqlite:///", "journal:///"):
        if url.startswith(scheme):
            path = url[len(scheme):].split("?", 1)[0]
            return path if path and path != ":memory:" else None
    return None


def why_not_only_mine(path: str | None) -> str | None:
    """None when only this user (or root) can change the file at `path`, else why not. `path`
    None is a database server: its other accounts may write the study, so it is never only mine."""
    if path is None:
        return "the storage is a database server, which other accounts may write"
    me = os.geteuid()
    for name in (path + side for side in _SQLITE_SIDE_FILES):
        try:
            st = os.stat(name)
        except FileNotFoundError:
            continue
        if st.st_uid != me:
            return f"the storage {name} belongs to uid {st.st_uid}, not to you (uid {me})"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return (f"the storage {name} can be written by other users (mode "
                    f"{stat.S_IMODE(st.st_mode):o})")
    # The folder of the name given and of the file it leads to: whoever can write either can
    # put another file there, or a side file SQLite then reads (even in a sticky /tmp).
    for folder in dict.fromkeys(os.path.dirname(p) for p in (os.path.abspath(path),
                                                               os.path.realpath(path))):
        st = os.stat(folder)
        if st.st_uid not in (me, 0):
            return (f"the storage's folder {folder} belongs to uid {st.st_uid}, not to you "
                    f"(uid {me})")
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"the storage's folder {folder} can be written by other users"
    return None


def stored_code(script_command: Iterable[str] | None, workload: str | None) -> str | None:
    """What the study would run, shown exactly (None when it would run only autotune's own
    trainer on a built-in workload): the script command, or the workload module it imports."""
    if script_command:
        return one_line(shlex.join(str(a) for a in script_command))
    if workload and ":" in workload:
        return one_line(f"import of workload {workload}")
    return None


def check_stored_code(code: str | None, source: str, path: str | None, *, trusted: bool,
                      command_hint: str) -> None:
    """Refuse (one line, before anything runs or is written) to run `code` from `source` unless
    the storage at `path` is only this user's or the person passed --trust-study."""
    if code is None or trusted:
        return
    why = why_not_only_mine(path)
    if why is None:
        return
    raise ConfigError(f"{source} would run what its storage holds, not what you typed: {code}; "
                      f"{why}, so whoever can write it chose this; read it, then add "
                      f"{TRUST_FLAG} to run it{command_hint}")


def check_stored_libraries(config: Any, stored: Iterable[Any], local: Any, *,
                           trusted: bool) -> list[str]:
    """The libraries the export preloads from the stored topologies: refused (ConfigError)
    when a path could smuggle a second library or an option (not absolute, ':' or a space or a
    control character in it); refused unless --trust-study when it is not the very file this
    machine's probe finds for that library. Returns the warnings to print under --trust-study."""
    from ..plan.build import preloads
    warnings = []
    for topology in stored:
        for name, path in preloads(config, topology):
            shown = one_line(repr(path))
            if not isinstance(path, str) or not os.path.isabs(path) or any(
                    c == ":" or c.isspace() or not c.isprintable() for c in path):
                raise ConfigError(f"stored {name} library {shown} is not a plain absolute path; "
                                  "refusing to put it in LD_PRELOAD")
            why = _not_the_local_library(name, path, local)
            if why and not trusted:
                raise ConfigError(f"stored {name} library {shown} {why}; refusing to put it in "
                                  f"LD_PRELOAD ({TRUST_FLAG} exports it anyway)")
            if why:
                warnings.append(f"{name} library {shown} {why}; exported as stored "
                                f"({TRUST_FLAG})")
    return warnings


def check_stored_cluster(cluster: Any, source: str) -> None:
    """What a study across hosts stores and an export passes on, into environments and into the
    command each host's shell parses (hosts, addresses, interface, python, folder, forwarded
    PATH and kin): a control character in any is refused, never passed (one line)."""
    fields = {**{f"host {h.name}": h.name for h in cluster.hosts},
              **{f"address {a}": a for a in cluster.addresses}, **cluster.env,
              "iface": cluster.iface or "", "subnet": cluster.subnet or "",
              "ssh_config": cluster.ssh_config or "", "python": cluster.python, "cwd": cluster.cwd}
    for key, value in fields.items():
        if one_line(key) != key or one_line(value) != value:
            raise ConfigError(f"{source}: stored {one_line(key)}={one_line(value)} holds a "
                              "control character; refusing to export it")


def _not_the_local_library(name: str, path: str, local: Any) -> str | None:
    found = {**local.allocators, **local.omp_runtimes}.get(name)
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        regular = False
    if not regular:
        return "is not a file on this machine"
    if not found or os.path.realpath(found) != os.path.realpath(path):
        return f"is not the {name} this machine's probe finds ({found or 'none'})"
    return None
