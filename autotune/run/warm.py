"""The launches a search keeps running between its trials (run/session.py), so that a trial of a
launch already running is one more window of it, not a new start.

One session per launch (config.launch_part), the most recently used ones kept: verification's
lineup of the default launch and three candidates stays warm from round to round, and so do the
search's leader and the default launch, whose quality runs and window-knob neighbours come
back to them. A session is closed when more are open than `max_open`, when memory runs short,
when it failed, and when it used CPU while idle (oneCCL's progress threads may poll), which
would take the cores of the window being timed.
"""
from __future__ import annotations

import collections
import time
from dataclasses import replace

import psutil

from ..config import Config, launch_part
from ..plan.launch_plan import LaunchPlan
from .outcome import RunResult
from .session import SERVE_S, Session

# Sessions kept open: the default launch and verification's three candidates.
MAX_OPEN = 4
# Below this share of memory available, idle sessions are closed before a new one starts.
MIN_AVAILABLE_SHARE = 0.25


class WarmLaunches:
    """`run(config, plan_of)`: the window of `config` in its launch's session, started first
    when none runs. `plan_of(serve_s)` builds the trial's plan (its request asking for a
    session when serve_s > 0)."""

    def __init__(self, max_open: int = MAX_OPEN) -> None:
        self.max_open = max_open
        self.open: collections.OrderedDict[str, tuple[Session, float]] = \
            collections.OrderedDict()
        self.starts = self.windows = 0

    def run(self, config: Config, plan_of, timeout_s: float) -> tuple[RunResult, bool]:
        """(the window's run, whether it ran in a session already started)."""
        key = launch_part(config).key()
        self._close_spinning(but=key)
        held = self.open.pop(key, None)
        if held is not None and held[0].healthy():
            session = held[0]
            plan: LaunchPlan = plan_of(0.0)
            run = session.window(replace(plan.request, serve_s=SERVE_S), timeout_s)
            self.windows += 1
            warm = True
        else:
            self._make_room()
            session = Session(plan_of(SERVE_S))
            run = session.start()
            self.starts += 1
            warm = False
        if session.alive:
            self.open[key] = (session, time.monotonic())
        while len(self.open) > self.max_open:
            self._close_oldest()
        return run, warm

    def _close_spinning(self, but: str) -> None:
        now = time.monotonic()
        for key, (session, since) in list(self.open.items()):
            if key != but and (not session.healthy() or session.spins(now - since)):
                self.open.pop(key)
                session.close()

    def _make_room(self) -> None:
        while self.open and _memory_short():
            self._close_oldest()

    def _close_oldest(self) -> None:
        _, (session, _) = self.open.popitem(last=False)
        session.close()

    def close(self) -> None:
        """End every session (the search is over, or interrupted)."""
        while self.open:
            self._close_oldest()


def _memory_short() -> bool:
    vm = psutil.virtual_memory()
    return vm.available < MIN_AVAILABLE_SHARE * vm.total
