"""Open the study in optuna-dashboard, read-only, as measured: every trial with its configuration,
outcome and log tail, each at its class's measured accuracy (none where no run measured it; a
configuration that never ran is pruned, drawn in no chart), its verdict, step split and share of
the ceiling as columns, the throughput/accuracy Pareto front of `autotune report`, and the
recommendation in the summary's lines with its launch command as the study's note. Nothing in the
study is written. Binds to 127.0.0.1 unless --host says otherwise. The dashboard has no login,
and 127.0.0.1 keeps out other machines, not the other users of this one: it warns at every start
(more loudly beyond 127.0.0.1). Run it on a machine you share only while you look.

examples:
  autotune dashboard                       then open the printed URL
  autotune dashboard --results runs/ --port 8081
  ssh -L 8080:127.0.0.1:8080 tuned-host    a remote study (its other users reach it too)
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
from wsgiref.simple_server import WSGIServer

from ..util.clean import one_line, printable
from ..tune import DashboardRequest, open_dashboard
from ._common import add_study_args, study_of


def _port(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535)")
    return n


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_study_args(p)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=_port, default=8080, help="port (default: 8080; 0 picks a free one)")


def _say_notes(notes: list[str]) -> None:
    for note in notes:
        print(f"autotune: note: {one_line(note)}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    board = open_dashboard(DashboardRequest(study=study_of(args), host=args.host, port=args.port),
                           before_serving=_say_notes)
    _stop_on_ctrl_c(board.server)
    print(f"autotune: warning: {board.warning}", file=sys.stderr, flush=True)
    print(printable(board.banner), flush=True)
    try:
        board.server.serve_forever()
    finally:
        board.server.server_close()
    print("dashboard stopped", file=sys.stderr)
    return 0


def _stop_on_ctrl_c(server: WSGIServer) -> None:
    """Ctrl-C ends serve_forever from a thread of its own (shutdown waits for the loop): as a
    KeyboardInterrupt it could land inside a request, where wsgiref's error handler caught it
    and the dashboard served on."""
    signal.signal(signal.SIGINT, lambda _sig, _frame: threading.Thread(
        target=server.shutdown, daemon=True).start())
