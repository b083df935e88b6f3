"""The live progress bar of a search in a terminal (rich): the budget as a bar with its ETA, the
phase (probe, search, verify, quality check), the trial number, what runs now in short, and the
best configuration so far against the default launch.

The bar is drawn by rich's own refresh thread in the autotune process, twice a second, from a
snapshot of plain fields the search loop sets between steps. Nothing is drawn inside a rank and
nothing waits for a draw, so no measured time or accuracy depends on it; the ticking clock and
spinner show that a 30 s quality run or verification round is alive. Only a terminal gets it:
see `wanted`.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import TextIO

from ..search.budget import format_seconds

PHASES = ("probe", "search", "verify", "quality check")


def wanted(*, quiet: bool, stream: TextIO) -> bool:
    """The bar only for a person at a terminal: not with --quiet, not in CI (`CI` set,
    as every CI service sets it), not on a terminal that cannot move its cursor (TERM=dumb: an
    editor's shell buffer), and only when both stdout and the progress stream are terminals, so
    `autotune search > log` and `2> log` keep today's plain lines."""
    if quiet or os.environ.get("CI") or os.environ.get("TERM") == "dumb":
        return False
    return _isatty(sys.stdout) and _isatty(stream)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):   # a closed or file-less stream
        return False


@dataclass
class BarState:
    """What the bar shows, set by the search's thread between steps (plain fields: the refresh
    thread only reads them, and a torn read costs one frame)."""
    budget_s: float
    started: float
    phase: str = "probe"
    trial: int | None = None
    now: str = ""                  # what runs now, in short
    best_ratio: float | None = None
    best_config: str = ""
    runs: int = 0
    failed: int = 0


def render_line(state: BarState, now: float) -> str:
    """The bar's text beside the bar itself, e.g. `search | 04:12/30:00 ETA 25:48 | trial 7 |
    best 1.32x (nproc=2 threads=1) | 6 run, 1 failed`."""
    elapsed = max(0.0, now - state.started)
    left = max(0.0, state.budget_s - elapsed)
    parts = [state.phase, f"{format_seconds(elapsed)}/{format_seconds(state.budget_s)} "
                          f"ETA {format_seconds(left)}"]
    if state.trial is not None:
        parts.append(f"trial {state.trial}")
    if state.best_ratio is not None:
        parts.append(f"best {state.best_ratio:.2f}x" +
                     (f" ({state.best_config})" if state.best_config else ""))
    parts.append(f"{state.runs} run, {state.failed} failed")
    return " | ".join(parts)


class LiveBar:
    """A rich Live display on `stream` that prints log lines above the bar."""

    def __init__(self, state: BarState, stream: TextIO) -> None:
        from rich.console import Console
        from rich.live import Live
        self.state = state
        self.console = Console(file=stream, highlight=False)
        # redirect_*: a stray print during the search lands above the bar instead of through it
        self.live = Live(console=self.console, get_renderable=self._renderable,
                         refresh_per_second=2, transient=True)

    def start(self) -> None:
        self.live.start()

    def stop(self) -> None:
        self.live.stop()

    def print(self, text: str) -> None:
        # markup=False: "[00:06/04:00]" and "[busy: ...]" are text, not rich markup
        self.console.print(text, markup=False, emoji=False, soft_wrap=True)

    def _renderable(self):
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.spinner import Spinner
        from rich.table import Table
        from rich.text import Text
        s, now = self.state, time.monotonic()
        line = Table.grid(padding=(0, 1))
        line.add_row(Spinner("dots"),
                     ProgressBar(total=max(s.budget_s, 1e-9),
                                 completed=min(max(0.0, now - s.started), s.budget_s), width=30),
                     Text(render_line(s, now), no_wrap=True, overflow="ellipsis"))
        if not s.now:
            return line
        return Group(line, Text(f"  now: {s.now}", no_wrap=True, overflow="ellipsis"))
