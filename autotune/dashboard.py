"""optuna-dashboard on a read-only view of a study's storage (ShownStorage: every trial with what
was measured, reporting/shown.py; the metric names; the recommendation as the study's note, in the
summary's own lines), and a server that binds to loopback unless told otherwise.

optuna-dashboard has no login and can edit studies (notes, attributes, deleting whole studies);
the view refuses every write, so what it serves can be read, not changed. 127.0.0.1 keeps other
machines out, not other users of this one: every local account can connect to a loopback port.
So it warns at every start, and louder when bound beyond 127.0.0.1 (the user's explicit choice).
"""
from __future__ import annotations

import copy
import ipaddress
import json
import os
import socket
import warnings
from collections.abc import Container
from typing import Any, Callable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import optuna
from optuna.trial import FrozenTrial, TrialState

from .config import Config
from .errors import AutotuneError
from .recommend.words import recommendation_lines
from .reporting.shown import shown_trials
from .study.attrs import StudyAttrs

METRIC_NAMES = ["throughput (samples/s)", "accuracy"]
LOCAL_WARNING = ("reachable by every user of this machine: it has no login, and anyone who "
                 "connects can read the study (its edits are refused); stop it (Ctrl-C) when "
                 "done (docs/security.md)")
EXPOSED_WARNING = ("exposed to the network: anyone who can reach it can read the study "
                   "(optuna-dashboard has no login)")


def set_metric_names(study: optuna.Study) -> None:
    """Label the two objectives (Optuna's own API; optuna_dashboard.set_objective_names is
    deprecated). Skipped when already set, so a read-mostly viewer does not rewrite the study."""
    if list(study.metric_names or []) == METRIC_NAMES:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ExperimentalWarning: the API is stable in practice
        study.set_metric_names(METRIC_NAMES)


# The first line of every note autotune writes: a stored note without it is the user's own.
NOTE_TITLE = "# autotune: "


def note_markdown(study_name: str, rec: dict[str, Any], command: str | None,
                  unit: str = "samples/s") -> str:
    """The study's note: the recommendation in the summary's own lines (recommend/words.py; the
    faster launches whose accuracy was not shown among them), its throughput, the configuration
    and the command that reproduces it (`unit`: "score" for a user's script, whose score may be
    1/time and is never samples/s)."""
    base = Config().to_dict()
    config = rec.get("config") or {}
    headline, *said = recommendation_lines(rec)
    lines = [f"{NOTE_TITLE}{study_name}", "", f"**{_literal(headline)}**", ""]
    lines += [f"- {_literal(line.strip())}" for line in said]
    if rec.get("throughput"):
        if unit == "samples/s":
            lines.append(f"- throughput: {rec['throughput']:.1f} samples/s "
                         f"(default launch {rec.get('default_throughput') or 0:.1f})")
        else:
            lines.append(f"- score: {rec['throughput']:.4g} (default launch "
                         f"{rec.get('default_throughput') or 0:.4g}; see `autotune report`)")
    lines += ["", "## Configuration", "", "| knob | value | default |", "|---|---|---|"]
    for knob, value in config.items():
        mark = "**" if value != base.get(knob) else ""
        lines.append(f"| {knob} | {mark}{value}{mark} | {base.get(knob)} |")
    if command:
        lines += ["", "## Launch command", "", "```sh", command.rstrip(), "```",
                  "", "`autotune export --format shell|torchrun|json` prints it again; "
                  "`autotune report` prints these lines again."]
    return "\n".join(lines) + "\n"


def _literal(text: str) -> str:
    """`text` as Markdown shows it word for word: the marks Markdown acts on inside a line
    escaped (CommonMark's backslash escapes), so a `*` or `[` is never read as markup."""
    return "".join(f"\\{c}" if c in _MARKUP else c for c in text)


_MARKUP = set("\\`*_[]<>|~")


def save_study_note(study: optuna.Study, rec: Any, command: str | None) -> None:
    """Write the recommendation as the study's dashboard note (after a search, so that
    optuna-dashboard run on the storage directly shows it too)."""
    from optuna_dashboard import save_note
    data = rec.to_json() if hasattr(rec, "to_json") else dict(rec)
    set_metric_names(study)
    unit = "score" if StudyAttrs.of(study).script_command else "samples/s"
    save_note(study, note_markdown(study.study_name, data, command, unit))


def shown_system_attrs(study_name: str, attrs: StudyAttrs, stored_note: str
                       ) -> tuple[dict[str, Any], str | None]:
    """The study system attributes the view adds: the metric names, and the note derived from the
    stored recommendation now (unless the stored note is the user's own), with the prefix of the
    note's keys (None: no note added). Made by the public calls on a scratch in-memory study, so
    the keys are optuna-dashboard's own."""
    from optuna_dashboard import save_note
    store = optuna.storages.InMemoryStorage()
    scratch = optuna.create_study(storage=store, directions=["maximize", "maximize"])
    set_metric_names(scratch)

    def added() -> dict[str, Any]:
        return store.get_study_system_attrs(store.get_study_id_from_name(scratch.study_name))
    before = set(added())
    rec = attrs.recommendation
    if rec and (not stored_note.strip() or stored_note.startswith(NOTE_TITLE)):
        unit = "score" if attrs.script_command else "samples/s"
        save_note(scratch, note_markdown(study_name, rec, rec.get("command"), unit))
    note_keys = [k for k in added() if k not in before]
    return added(), (os.path.commonprefix(note_keys) or None) if note_keys else None


class ShownStorage(optuna.storages.BaseStorage):
    """A study storage as `autotune dashboard` shows it, read-only: trials with what was measured
    (reporting/shown.py), the metric names and the note derived when read. Nothing reaches the
    stored study: the dashboard's own edits (a note, a new or deleted study) are refused, and a
    study of any earlier autotune is shown by the same rules without being rewritten."""

    def __init__(self, inner: optuna.storages.BaseStorage):
        self.inner = inner
        self._notes: dict[tuple[int, str], tuple[dict[str, Any], str | None]] = {}

    def get_all_studies(self) -> list[Any]:
        out = []
        for frozen in self.inner.get_all_studies():
            shown = copy.copy(frozen)
            shown.system_attrs = self.get_study_system_attrs(
                self.inner.get_study_id_from_name(frozen.study_name))
            out.append(shown)
        return out

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        stored = self.inner.get_study_system_attrs(study_id)
        name = self.inner.get_study_name_from_id(study_id)
        attrs = StudyAttrs(self.inner.get_study_user_attrs(study_id))
        from optuna_dashboard import get_note
        note = get_note(optuna.load_study(study_name=name, storage=self.inner))
        key = (study_id, json.dumps([attrs.recommendation, note], sort_keys=True, default=str))
        if key not in self._notes:
            self._notes[key] = shown_system_attrs(name, attrs, note)
        added, prefix = self._notes[key]
        # the stored study note's own keys give way to the derived ones (a trial's note stays)
        kept = {k: v for k, v in stored.items() if not (prefix and k.startswith(prefix))}
        return {**kept, **added}

    def get_all_trials(self, study_id: int, deepcopy: bool = True,
                       states: Container[TrialState] | None = None) -> list[FrozenTrial]:
        attrs = StudyAttrs(self.inner.get_study_user_attrs(study_id))
        shown = shown_trials(self.inner.get_all_trials(study_id, deepcopy=False), attrs)
        return [t for t in shown if states is None or t.state in states]

    # reads passed through
    def get_study_id_from_name(self, study_name: str) -> int:
        return self.inner.get_study_id_from_name(study_name)

    def get_study_name_from_id(self, study_id: int) -> str:
        return self.inner.get_study_name_from_id(study_id)

    def get_study_directions(self, study_id: int) -> list[Any]:
        return self.inner.get_study_directions(study_id)

    def get_study_user_attrs(self, study_id: int) -> dict[str, Any]:
        return self.inner.get_study_user_attrs(study_id)

    def get_trial(self, trial_id: int) -> FrozenTrial:
        return self.inner.get_trial(trial_id)

    def get_trial_id_from_study_id_trial_number(self, study_id: int, trial_number: int) -> int:
        return self.inner.get_trial_id_from_study_id_trial_number(study_id, trial_number)

    # every write is refused
    def _refuse(self, *_args: Any, **_kwargs: Any) -> Any:
        raise AutotuneError("autotune dashboard shows the study read-only: nothing is changed")

    create_new_study = delete_study = set_study_user_attr = set_study_system_attr = _refuse
    create_new_trial = set_trial_param = set_trial_state_values = _refuse
    set_trial_intermediate_value = set_trial_user_attr = set_trial_system_attr = _refuse


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def url(host: str, port: int, study_id: int | None = None) -> str:
    shown = socket.gethostname() if host in ("0.0.0.0", "::", "") else host
    if ":" in shown:
        shown = f"[{shown}]"
    path = f"/dashboard/studies/{study_id}" if study_id is not None else "/dashboard"
    return f"http://{shown}:{port}{path}"


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - wsgiref's signature
        pass  # one line per static asset drowns the URL the user needs


class _Server6(WSGIServer):
    address_family = socket.AF_INET6


def named_hosts_only(app: Callable, bound: str) -> Callable:
    """`app` answering only requests whose Host header names this machine: an IP address,
    localhost, the address the user bound (--host), or this machine's name when bound beyond
    loopback. A web page whose own name was made to resolve to 127.0.0.1 (DNS rebinding) sends
    its own name, and gets 403 instead of the study. The port is not checked: an ssh tunnel
    (`ssh -L 9000:127.0.0.1:8080`) arrives with its own."""
    names = {"localhost", bound.strip("[]").lower()} - {""}
    if not is_loopback(bound):
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}

    def checked(environ: dict, start_response: Callable) -> Any:
        name = _host_name(environ.get("HTTP_HOST", ""))
        if name in names or _is_address(name):
            return app(environ, start_response)
        start_response("403 Forbidden", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"autotune dashboard: this Host is not this machine's name or address\n"]
    return checked


def _host_name(header: str) -> str:
    """The name in a Host header, without its port and an IPv6 address's brackets."""
    name = header.rsplit("]", 1)[0].lstrip("[") if header.startswith("[") else \
        header.rsplit(":", 1)[0]
    return name.lower()


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def make(storage: optuna.storages.BaseStorage, host: str, port: int) -> WSGIServer:
    """Bind now (so a busy port is an error before any URL is printed); serve with serve_forever."""
    from optuna_dashboard import wsgi
    app = named_hosts_only(wsgi(storage), host)
    server_class = _Server6 if ":" in host else WSGIServer
    try:
        return make_server(host, port, app, server_class=server_class, handler_class=_QuietHandler)
    except OSError as exc:
        raise AutotuneError(f"dashboard: cannot listen on {host}:{port}: "
                            f"{exc.strerror or exc}") from None
