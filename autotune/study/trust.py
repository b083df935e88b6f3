"""A study is data, never code, until a person says so.

A study can hold things that run: the user's script command (script mode), a `module:function`
workload that the trials import, the hosts, python, folder, ssh config and environment of a
search across hosts, and the library paths of the machine it measured, which an export turns
into LD_PRELOAD. Whoever can write the storage can change them: on a shared PostgreSQL study,
any worker's account; on a file, whoever can write the file or a folder above it. So `verify`,
`launch` and `export` pass on what a study stores only from a storage that provably only this
user can write, judged on the file actually opened and every folder above it (checked_file.py),
before anything is read, and read through that same walk. From any other they print exactly
what would run and its short hash, and refuse until the person who read it gives that hash to
--trust-study: the stored content must still hash to it, so what runs is what was shown. A
manifest written by `export --format json` records where its program came from, so it does not
become trusted by being the user's own file. Library paths must be the ones this machine's own
probe finds.

Why not trust "the user who created the study" as the study records it: that record is itself
data in the storage, writable by the same people. File ownership and mode are kept by the kernel.
"""
from __future__ import annotations

import hashlib
import json
import re
import weakref
from dataclasses import dataclass
from typing import Any

from ..util.checked_file import CheckedFile, open_checked, owner_name
from ..util.clean import one_line
from ..errors import ConfigError

TRUST_FLAG = "--trust-study"
_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")   # SQLite reads all of them as the study
_HASH = re.compile(r"[0-9a-f]{12}")


def storage_file(url: str) -> str | None:
    """The file an SQLite or journal URL names (None for a database server)."""
    for scheme in ("sqlite:///", "journal:///"):
        if url.startswith(scheme):
            path = url[len(scheme):].split("?", 1)[0]
            return path if path and path != ":memory:" else None
    return None


@dataclass(frozen=True)
class Provenance:
    """Where a study was read from, and whether only this user can change it."""
    shown: str                        # the file, or the server's URL (password hidden)
    why: str | None                   # None: only this user can change it; else why not
    url: str                          # open the storage by this URL: through the checked folder
    held: CheckedFile | None = None   # that folder, open while the storage is

    def hold_for(self, storage: Any) -> None:
        """Keep the checked folder open as long as `storage` may open connections through it
        (its fd number must never name another folder meanwhile)."""
        if self.held is not None:
            weakref.finalize(storage, self.held.close)


def storage_provenance(url: str, shown_url: str) -> Provenance:
    """The storage at `url` judged before it is read (`shown_url`: the URL fit to print)."""
    path = storage_file(url)
    if path is None:
        return Provenance(shown=shown_url, why=f"the storage {shown_url} is a database server, "
                                               "which other accounts may write", url=url)
    try:
        checked = open_checked(path, private_folder=True, side_suffixes=_SQLITE_SIDE_FILES)
    except OSError as exc:   # a missing file: the caller says so; any other is not shown mine
        return Provenance(shown=path, why=f"the storage {path} cannot be checked "
                                          f"({exc.strerror or exc})", url=url)
    checked.close_file()          # read through the folder: SQLite opens its side files there
    scheme, rest = url.split(":///", 1)
    query = rest.partition("?")[1] + rest.partition("?")[2]
    return Provenance(shown=checked.path, why=not_only_yours("storage", checked),
                      url=f"{scheme}:///{checked.in_folder()}{query}", held=checked)


def not_only_yours(what: str, checked: CheckedFile) -> str | None:
    """Why someone else may have chosen what `checked` holds, naming it and its owner."""
    if checked.why is None:
        return None
    return (f"the {what} {checked.path} (owner {owner_name(checked.owner)}) is not only yours: "
            f"{checked.why}")


def why_not_only_mine(path: str | None) -> str | None:
    """None when only this user (or root) can change the storage file at `path` and the folders
    above it, else why not; None `path` is a database server, never only mine."""
    if path is None:
        return "the storage is a database server, which other accounts may write"
    with open_checked(path, private_folder=True, side_suffixes=_SQLITE_SIDE_FILES) as checked:
        return not_only_yours("storage", checked)


@dataclass(frozen=True)
class StoredCode:
    """What a study or manifest would make run or choose, item by item (what, value): shown
    in a refusal, and hashed so that --trust-study HASH accepts exactly what was shown."""
    items: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.items)

    def __add__(self, other: "StoredCode") -> "StoredCode":
        return StoredCode(self.items + other.items)

    def shown(self) -> str:
        return one_line("; ".join(f"{what} {value}" for what, value in self.items))

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.items).encode()).hexdigest()[:12]


def require_hash(trust: str | None) -> None:
    """--trust-study takes the hash a refusal printed (checked before anything is read)."""
    if trust is not None and not _HASH.fullmatch(trust):
        given = f" {one_line(trust)!r}" if trust else ""
        raise ConfigError(f"{TRUST_FLAG}{given}: give the 12-digit hash that autotune printed "
                          "when it refused (it accepts exactly what was shown); run the command "
                          f"without {TRUST_FLAG} to see what it would run and its hash")


def check_trusted(code: StoredCode, source: str, why: str | None, trust: str | None, *,
                  action: str = "run", hint: str = "") -> None:
    """Refuse (one line, before anything runs or is written) to pass on `code` from `source`
    when `why` says someone else may have chosen it, unless `trust` is its hash."""
    if not code or why is None or trust == code.digest():
        return
    digest = code.digest()
    changed = (f"; {TRUST_FLAG} {trust} is not its hash: it changed after it was shown, or the "
               "hash is of something else" if trust else "")
    raise ConfigError(f"{source} holds what would {action}, not what you typed: {code.shown()}"
                      f"{changed}; {why}, so whoever can write it chose this; read it, then add "
                      f"{TRUST_FLAG} {digest} to {action} exactly this{hint}")
