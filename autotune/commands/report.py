"""`autotune report` and `autotune dashboard`: a stored study read, as a report value or served
by optuna-dashboard. Neither writes what the study measured."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from wsgiref.simple_server import WSGIServer

from .. import dashboard
from ..util.clean import one_line
from ..reporting.report import Report, build_report
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
    """optuna-dashboard on the study, bound to `host:port` (0: a free port). The study's note is
    written (its recommendation and launch command) before the server starts; `before_serving`
    gets the provenance notes first, so they are said before anything else happens."""
    opened = open_results(req.study)
    study = opened.study
    before_serving(opened.notes)
    dashboard.prepare(study)
    storage = storage_of(study)
    server = dashboard.make(storage, req.host, req.port)
    port = server.server_address[1]
    why = dashboard.LOCAL_WARNING if dashboard.is_loopback(req.host) else \
        dashboard.EXPOSED_WARNING
    address = dashboard.url(req.host, port, storage.get_study_id_from_name(study.study_name))
    return Dashboard(server, opened.notes, f"dashboard on {req.host}:{port} is {why}",
                     f"optuna-dashboard for {one_line(study.study_name)} ({one_line(opened.url)}) "
                     f"at {address}"
                     "\npress Ctrl-C to stop")
