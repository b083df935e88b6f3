"""The study's storage: open or resume it (checked before Optuna touches the file), describe it.

This package is the only code that writes to Optuna storage (records.py writes the trials,
owners.py claims and recovers running ones). The study carries the machine it ran on, so a study
can be read (and its command exported) a year later on another machine. Only Optuna's public API
is used: the storage a study was opened with is kept here (`storage_of`), since a Study does not
expose it.
"""
from __future__ import annotations

import os
import platform
import re
import time
import weakref
from typing import Any

import optuna

from .. import __version__
from ..errors import StorageError
from ..util.private_files import create_private, private_dir
from .attrs import StudyAttrs, write_description
from .provenance import Here, why_not_here
# the URLs' own words live in urls.py; commands read them from here too
from .urls import (DEFAULT_RESULTS, default_storage, holds_password,  # noqa: F401
                   redact, redact_message)
from ..probe.topology import SCHEMA_VERSION, Topology, TorchBuild

optuna.logging.set_verbosity(optuna.logging.WARNING)

def study_name(workload: str, topology: Topology, space_name: str = "cpu",
               torch: TorchBuild | None = None) -> str:
    """Identifies workload, space, hardware and torch build: the same command on the same setup
    resumes the same study; other hardware or another torch starts its own. `torch` defaults to
    the one this process (and so every trial) runs."""
    if torch is None:
        from ..probe import torch_build
        torch = torch_build()
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", workload)
    return f"autotune-{safe}-{space_name}-{topology.fingerprint()}-{torch.tag()}"


def open_storage(url: str, *, create_under: str | None = None) -> optuna.storages.BaseStorage:
    """Open an Optuna storage, with errors a user can act on. A missing folder for an SQLite or
    journal file is created only inside `create_under` (the search's --results): a typo in
    --storage must not leave folders elsewhere on the machine (as root, anywhere)."""
    file_path = next((url[len(s):] for s in ("sqlite:///", "journal:///") if url.startswith(s)), "")
    if file_path and file_path != ":memory:":
        _make_folder(url, os.path.dirname(os.path.abspath(file_path)), create_under)
        _create_private(url, file_path)
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        if path and path != ":memory:" and os.path.exists(path):
            _check_sqlite(path, redact(url), studies=False)
    elif "://" not in url:
        raise StorageError(f"storage {url!r}: not a URL; use e.g. sqlite:///results/autotune.db "
                           "or postgresql://user@host/db")
    try:
        if url.endswith(".log") and url.startswith("journal:///"):
            from optuna.storages.journal import JournalFileBackend, JournalStorage
            return JournalStorage(JournalFileBackend(url[len("journal:///"):]))
        storage = _rdb_storage(url)
        if url.startswith("sqlite") and ":memory:" not in url:
            _tune_sqlite(storage)
        return storage
    except ImportError:
        hint = " (pip install 'psycopg[binary]')" if url.startswith("postgresql") else ""
        raise StorageError(f"storage {redact(url)}: no database driver for this URL{hint}") \
            from None
    except Exception as exc:  # SQLAlchemy/driver errors: many types, one message for the user
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StorageError(f"storage {redact(url)}: {redact_message(first, url)}") from None


def _make_folder(url: str, folder: str, create_under: str | None) -> None:
    if os.path.isdir(folder):
        return
    root = os.path.realpath(create_under) if create_under else None
    inside = root is not None and os.path.commonpath([root, os.path.realpath(folder)]) == root
    if not inside:
        where = f"; autotune creates folders only under --results ({create_under})" \
            if create_under else ""
        raise StorageError(f"storage {redact(url)}: folder {folder} does not exist{where}; "
                           "create it first or choose another path")
    try:
        private_dir(folder)    # 0700: the study holds script arguments and log tails
    except OSError as exc:
        raise StorageError(f"storage {redact(url)}: cannot create {folder}: {exc.strerror}") from None


def _create_private(url: str, path: str) -> None:
    """A new SQLite or journal file is made 0600 before Optuna opens it (SQLite gives its -wal
    and -shm files the same mode); an existing one keeps its mode."""
    try:
        create_private(path)
    except OSError as exc:
        raise StorageError(f"storage {redact(url)}: cannot create {path}: {exc.strerror}") from None


def _rdb_storage(url: str) -> optuna.storages.RDBStorage:
    """Workers of a shared search that start together on a fresh database all create Optuna's
    tables; on PostgreSQL the losers fail on the catalog's unique index (or find the table
    created meanwhile), and then the tables exist: one more try succeeds. So do two searches
    started together with --allow-concurrent on one new SQLite file (the loser failed on
    alembic_version's unique row, or found a table created meanwhile: exit 2 at once)."""
    import sqlalchemy.exc
    attempt = 0
    while True:
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs=_engine_kwargs(url))
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError,
                sqlalchemy.exc.OperationalError) as exc:
            attempt += 1
            raced = not isinstance(exc, sqlalchemy.exc.OperationalError) or \
                "already exists" in str(exc) or "locked" in str(exc)
            if attempt == 3 or not raced:
                raise
            time.sleep(0.5 * attempt)


def _tune_sqlite(storage: optuna.storages.RDBStorage) -> None:
    """WAL with synchronous=NORMAL: a commit no longer waits for an fsync (Optuna commits every
    attribute separately, and fsyncs were most of a search's own overhead), yet a killed
    process loses nothing it committed; only a power cut can drop the last transactions."""
    from sqlalchemy import event

    def pragmas(dbapi_conn, _record) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()
    event.listen(storage.engine, "connect", pragmas)
    storage.engine.dispose()  # connections opened during set-up predate the listener


def _engine_kwargs(url: str) -> dict[str, Any]:
    # Two searches sharing one SQLite file wait for each other's writes instead of failing.
    return {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}


def library_versions() -> dict[str, str]:
    import torch
    return {"autotune": __version__, "torch": torch.__version__, "optuna": optuna.__version__,
            "python": platform.python_version()}


def open_study(storage: optuna.storages.BaseStorage, name: str, *, sampler=None,
               create: bool = True) -> optuna.Study:
    if not create:
        try:
            study = optuna.load_study(study_name=name, storage=storage, sampler=sampler)
        except KeyError:
            raise StorageError(f"no study named {name!r} in this storage") from None
    else:
        study = optuna.create_study(study_name=name, storage=storage, sampler=sampler,
                                    directions=["maximize", "maximize"], load_if_exists=True)
    _OPENED[study] = (storage, storage.get_study_id_from_name(name), {})
    return study


# The storage each study was opened with (open_study), and the study's id in it: the public way
# to reach what a Study keeps privately, for the few writes its API has no method for.
# (A trial's id never changes, so each is looked up once.)
_OPENED: "weakref.WeakKeyDictionary[optuna.Study, tuple[Any, int, dict[int, int]]]" = \
    weakref.WeakKeyDictionary()


def storage_of(study: optuna.Study) -> optuna.storages.BaseStorage:
    return _opened(study)[0]


def trial_id(study: optuna.Study, number: int) -> int:
    """The storage's id of trial `number` of `study` (storage methods take ids, not numbers)."""
    storage, study_id, ids = _opened(study)
    if number not in ids:
        ids[number] = storage.get_trial_id_from_study_id_trial_number(study_id, number)
    return ids[number]


def _opened(study: optuna.Study) -> tuple[Any, int, dict[int, int]]:
    try:
        return _OPENED[study]
    except KeyError:
        raise StorageError(f"study {study.study_name!r} was not opened with open_study") from None


def find_study(storage: optuna.storages.BaseStorage, name: str | None, *,
               here: Here | None = None) -> str:
    """The study to report on: `name` if given, else the most recent autotune study measured
    here (this hardware, this torch), else the most recent one at all."""
    summaries = optuna.get_all_study_summaries(storage, include_best_trial=False)
    names = [s.study_name for s in summaries]
    if name:
        if name not in names:
            raise StorageError(f"no study named {name!r}; studies here: {', '.join(names) or 'none'}")
        return name
    ours = [s for s in summaries if s.study_name.startswith("autotune-")]
    if not ours:
        raise StorageError("no autotune study in this storage; run `autotune search` first")
    # a study with no trial yet has no start time: it sorts first
    ours.sort(key=lambda s: (s.datetime_start is not None, s.datetime_start or 0))
    mine = [s for s in ours if here is not None and why_not_here(s.user_attrs or {}, here) is None]
    return (mine or ours)[-1].study_name


def describe_study(study: optuna.Study, *, topology: Topology, workload: str,
                   space: dict[str, Any], settings: dict[str, Any],
                   torch: TorchBuild | None = None) -> None:
    """Self-describing metadata, written once (the first run's machine is the study's machine)."""
    if StudyAttrs.of(study).described:
        return
    if torch is None:
        from ..probe import torch_build
        torch = torch_build()
    write_description(study, schema_version=SCHEMA_VERSION, autotune_version=__version__,
                      topology=topology, torch=torch, workload=workload, space=space,
                      settings=settings, library_versions=library_versions())


def require_existing(url: str) -> None:
    """For the commands that read results (report, export, launch, dashboard): a storage file
    that does not exist yet is an error, not something to create (Optuna would otherwise leave a
    fresh empty database behind a typo), and an SQLite file must hold Optuna studies."""
    for scheme in ("sqlite:///", "journal:///"):
        path = url[len(scheme):] if url.startswith(scheme) else None
        if path and path != ":memory:":
            if not os.path.exists(path):
                raise StorageError(f"storage {redact(url)}: {path} does not exist; run "
                                   "`autotune search` first, or pass --results DIR / --storage URL")
            if not os.path.isfile(path):
                raise StorageError(f"storage {redact(url)}: {path} is not a file")
            if os.path.getsize(path) == 0:
                raise StorageError(f"storage {redact(url)}: {path} is empty: no study recorded")
            if scheme == "sqlite:///":
                _check_sqlite(path, redact(url), studies=True)


def _check_sqlite(path: str, shown: str, *, studies: bool) -> None:
    """The SQLite checks, before Optuna opens the file. Writers (studies=False) look at the header
    only: any other file is refused, never overwritten. Readers (studies=True) open it read-only:
    Optuna would add its tables to any SQLite database it is pointed at, and a damaged one fails
    later with a driver traceback."""
    if not studies:
        with open(path, "rb") as fh:
            head = fh.read(16)
        if head and not head.startswith(b"SQLite format 3"):
            raise StorageError(f"storage {shown}: {path} is not an SQLite database")
        return
    import sqlite3
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise StorageError(f"storage {shown}: {path} is not a readable SQLite database ({exc})") \
            from None
    if "studies" not in tables:
        raise StorageError(f"storage {shown}: {path} is an SQLite database without Optuna studies "
                           "(not written by `autotune search`)")
