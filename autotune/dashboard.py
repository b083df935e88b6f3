"""optuna-dashboard on a study's storage: metric names, the recommendation as the study's note, and
a server that binds to loopback unless told otherwise.

The dashboard can edit studies (notes, user attributes, deleting whole studies) and has no login,
so whoever can reach its port can change results. 127.0.0.1 keeps other machines out, not other
users of this one: every local account can connect to a loopback port. So it warns at every start,
and louder when bound beyond 127.0.0.1 (the user's explicit choice).
"""
from __future__ import annotations

import ipaddress
import socket
import warnings
from typing import Any, Callable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import optuna

from .quality.verdict import recommendation_claims
from .recommend.compile_words import compile_lines
from .config import Config
from .errors import AutotuneError
from .study.attrs import StudyAttrs
from .study.records import RUN_CPU_WORDS

METRIC_NAMES = ["throughput (samples/s)", "accuracy"]
LOCAL_WARNING = ("reachable by every user of this machine: it has no login, and anyone who "
                 "connects can read and edit the study; stop it (Ctrl-C) when done "
                 "(docs/security.md)")
EXPOSED_WARNING = ("exposed to the network: anyone who can reach it can read and edit the study "
                   "(optuna-dashboard has no login)")


def set_metric_names(study: optuna.Study) -> None:
    """Label the two objectives (Optuna's own API; optuna_dashboard.set_objective_names is
    deprecated). Skipped when already set, so a read-mostly viewer does not rewrite the study."""
    if list(study.metric_names or []) == METRIC_NAMES:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ExperimentalWarning: the API is stable in practice
        study.set_metric_names(METRIC_NAMES)


def note_markdown(study_name: str, rec: dict[str, Any], command: str | None,
                  unit: str = "samples/s") -> str:
    """The study's note: the headline, the configuration and the command to paste (`unit`:
    "score" for a user's script, whose score may be 1/time and is never samples/s)."""
    base = Config().to_dict()
    config = rec.get("config") or {}
    lines = [f"# autotune: {study_name}", "", f"**{rec.get('headline', 'recommendation')}**", ""]
    facts = []
    if rec.get("throughput"):
        if unit == "samples/s":
            facts.append(f"- throughput: {rec['throughput']:.1f} samples/s "
                         f"(default launch {rec.get('default_throughput') or 0:.1f})")
        else:
            facts.append(f"- score: {rec['throughput']:.4g} (default launch "
                         f"{rec.get('default_throughput') or 0:.4g}; see `autotune report`)")
    if rec.get("vs_run_cpu"):
        facts.append(f"- {rec['vs_run_cpu']:.2f}x over {RUN_CPU_WORDS}")
    facts += [f"- {line}" for line in compile_lines(rec)]
    if rec.get("accuracy") is not None:
        facts.append(f"- accuracy: {rec['accuracy']:.4f} (default launch "
                     f"{_fmt(rec.get('default_accuracy'))})")
    facts += [f"- {claim}" for claim in recommendation_claims(rec)]
    if rec.get("rounds"):
        facts.append(f"- verified in {rec['rounds']} interleaved round(s) against the default launch")
    lines += facts + ["", "## Configuration", "", "| knob | value | default |", "|---|---|---|"]
    for knob, value in config.items():
        mark = "**" if value != base.get(knob) else ""
        lines.append(f"| {knob} | {mark}{value}{mark} | {base.get(knob)} |")
    if command:
        lines += ["", "## Launch command", "", "```sh", command.rstrip(), "```",
                  "", "`autotune export --format shell|torchrun|json` prints it again."]
    return "\n".join(lines) + "\n"


def _fmt(x: float | None) -> str:
    return "unknown" if x is None else f"{x:.4f}"


def save_study_note(study: optuna.Study, rec: Any, command: str | None) -> None:
    """Write the recommendation as the study's dashboard note (called after a search, and by
    `autotune dashboard` for studies that have a recommendation but no note yet)."""
    from optuna_dashboard import save_note
    data = rec.to_json() if hasattr(rec, "to_json") else dict(rec)
    set_metric_names(study)
    unit = "score" if StudyAttrs.of(study).script_command else "samples/s"
    save_note(study, note_markdown(study.study_name, data, command, unit))


def has_note(study: optuna.Study) -> bool:
    from optuna_dashboard import get_note
    return bool(get_note(study))


def prepare(study: optuna.Study) -> None:
    """Metric names, and the note from the stored recommendation when the search could not write
    one (an older autotune, or optuna-dashboard missing when it ran)."""
    set_metric_names(study)
    rec = StudyAttrs.of(study).recommendation
    if rec and not has_note(study):
        save_study_note(study, rec, rec.get("command"))


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
