"""`autotune report` and `autotune dashboard`: a stored study read, as a report value or served
by optuna-dashboard. Neither writes what the study measured."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from wsgiref.simple_server import WSGIServer

import optuna

from .. import dashboard
from ..errors import StorageError
from ..util.clean import one_line
from ..reporting.report import Report, build_report
from ..study.provenance import newer_writer
from ..study.storage import storage_of
from .common import StudyRef, open_results


@dataclass(frozen=True, kw_only=True)
class ReportRequest:
    study: StudyRef = field(default_factory=StudyRef)
    top: int = 10


@dataclass(frozen=True)
class Reported:
    report: Report
    url: str                 # printable storage URL
    notes: list[str]         # provenance

    def to_json(self) -> dict[str, Any]:
        return {"storage": self.url, **self.report.to_json(), "provenance": self.notes}


def report(req: ReportRequest) -> Reported:
    opened = open_results(req.study)
    return Reported(build_report(opened.study, top=req.top), opened.url, opened.notes)


@dataclass(frozen=True, kw_only=True)
class DashboardRequest:
    study: StudyRef = field(default_factory=StudyRef)
    host: str = "127.0.0.1"
    port: int = 8080


@dataclass(frozen=True)
class Dashboard:
    """A server ready to serve (serve_forever), and what to tell the person about it."""
    server: WSGIServer
    notes: list[str]         # provenance
    warning: str             # who can reach it, and what they can do
    banner: str              # where it is


def open_dashboard(req: DashboardRequest, *, before_serving=lambda notes: None) -> Dashboard:
    """optuna-dashboard on a read-only view of the study (dashboard.ShownStorage: what was
    measured, its note in the summary's lines; nothing written), bound to `host:port` (0: a free
    port). `before_serving` gets the provenance notes first, so they are said before anything
    else happens. A study this autotune cannot show (written by a newer one, or unreadable) is
    a one-line StorageError before anything is served."""
    opened = open_results(req.study)
    study = opened.study
    storage = dashboard.ShownStorage(storage_of(study))
    _readable(storage, study, opened.url)
    before_serving(opened.notes)
    server = dashboard.make(storage, req.host, req.port)
    port = server.server_address[1]
    why = dashboard.LOCAL_WARNING if dashboard.is_loopback(req.host) else \
        dashboard.EXPOSED_WARNING
    address = dashboard.url(req.host, port, storage.get_study_id_from_name(study.study_name))
    return Dashboard(server, opened.notes, f"dashboard on {req.host}:{port} is {why}",
                     f"optuna-dashboard for {one_line(study.study_name)} ({one_line(opened.url)}) "
                     f"at {address}"
                     "\npress Ctrl-C to stop")


def _readable(storage: dashboard.ShownStorage, study: optuna.Study, url: str) -> None:
    """Every trial of `study` shown once before serving: what cannot be read is said now, in one
    line with what to do, not as a broken page."""
    name = one_line(study.study_name)
    stored = [study.user_attrs] + [t.user_attrs for t in study.get_trials(deepcopy=False)]
    newer = newer_writer(stored)
    if newer:
        raise StorageError(f"dashboard: study {name!r} ({url}) was written by a newer autotune "
                           f"({newer}): upgrade autotune to show it")
    study_id = storage.get_study_id_from_name(study.study_name)
    try:
        storage.get_all_trials(study_id, deepcopy=False)
        storage.get_study_system_attrs(study_id)
    except Exception as exc:   # a stored value of a shape no autotune writes
        raise StorageError(f"dashboard: study {name!r} ({url}) cannot be read: "
                           f"{one_line(str(exc) or type(exc).__name__)}; it was not written by "
                           "autotune or is damaged: open another study with --study") from None
