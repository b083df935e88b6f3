"""The launches a search keeps running between its trials (run/session.py on this machine,
run/spanning_session.py across hosts), so that a trial of a launch already running is one more
window of it, not a new start.

One session per launch (config.launch_part, and across hosts the hosts it runs on), the most
recently used ones kept: verification's lineup of the default launch and four candidates stays
warm from round to round, and so do the search's leader and the default launch, whose quality
runs and window-knob neighbours come back to them. A session is closed when more are open than
`max_open`, when memory runs short, when it failed, and when it used CPU while idle (oneCCL's
progress threads may poll), which would take the cores of the window being timed.
"""
from __future__ import annotations

import collections
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Union

import psutil

from ..config import Config, launch_part
from ..plan.launch_plan import LaunchPlan
from .outcome import RunResult
from .session import SERVE_S, Session
from .spanning import SPAN_POLL_S
from .spanning_session import SpanningSession
from .unreached import OWED

# Sessions kept open: verification's whole lineup (search/lineup.py), the default launch, three
# candidates and the default compiled, so that no round starts one of them anew. At 4, kept
# before the compiled reference joined, each round of a 5-member lineup restarted one launch, a
# start the reserve had priced as a window: a 5-minute search's verification took 56 s against
# the 48 s it kept, and its look lost a pair to it (2026-11-30).
MAX_OPEN = 5
# Below this share of memory available, idle sessions are closed before a new one starts.
MIN_AVAILABLE_SHARE = 0.25

AnySession = Union[Session, SpanningSession]
PlanOf = Callable[[float], LaunchPlan]


def session_for(plan: LaunchPlan) -> AnySession:
    """The session that serves `plan`'s launch: its ranks here, or started by launchers."""
    return SpanningSession(plan) if plan.launchers else Session(plan)


class WarmLaunches:
    """`run(config, plan_of)`: the window of `config` in its launch's session, started first
    when none runs. `plan_of(serve_s)` builds the trial's plan (its request asking for a
    session when serve_s > 0; with serve_s 0 only its request is read). `where`: the hosts a
    launch across hosts runs on (part of what makes it the same launch)."""

    def __init__(self, max_open: int = MAX_OPEN) -> None:
        self.max_open = max_open
        self.open: collections.OrderedDict[str, tuple[AnySession, float]] = \
            collections.OrderedDict()
        self.starts = self.windows = 0

    def run(self, config: Config, plan_of: PlanOf, timeout_s: float,
            where: Sequence[str] = ()) -> tuple[RunResult, bool]:
        """(the window's run, whether it ran in a session already started)."""
        key = _key(config, where)
        self._close_spinning(but={key})
        session = self._held(key)
        warm = session is not None
        if session is not None:
            self.windows += 1
            run = session.window(replace(plan_of(0.0).request, serve_s=SERVE_S), timeout_s)
        else:
            self._make_room()
            self.starts += 1
            session = session_for(plan_of(SERVE_S))
            run = session.start()
        self._keep(key, session)
        return run, warm

    def run_together(self, asks: Sequence[tuple[Config, PlanOf, Sequence[str]]],
                     timeout_s: float) -> list[tuple[RunResult, bool]]:
        """The windows of several launches across disjoint hosts at the same time (a class's
        seeded quality runs side by side), each in its launch's session; as `run` each."""
        keys = [_key(config, where) for config, _plan_of, where in asks]
        self._close_spinning(but=set(keys))
        begun: list[tuple[str, SpanningSession, RunResult | None, bool]] = []
        try:
            for key, (_config, plan_of, _where) in zip(keys, asks):
                held = self._held(key)
                if isinstance(held, SpanningSession):
                    self.windows += 1
                    session = held
                    early = session.begin(replace(plan_of(0.0).request, serve_s=SERVE_S),
                                          timeout_s)
                else:
                    self._make_room()
                    self.starts += 1
                    session = SpanningSession(plan_of(SERVE_S))
                    early = session.begin()
                begun.append((key, session, early, held is not None))
            runs = _wait_all([(session, early) for _k, session, early, _w in begun])
        except BaseException:   # Ctrl-C: no launch begun here outlives it
            for _k, session, _early, _w in begun:
                session.close()
            raise
        for key, session, _early, _warm in begun:
            self._keep(key, session)
        return [(run, warm) for run, (_k, _s, _e, warm) in zip(runs, begun)]

    def running(self, config: Config) -> bool:
        """Whether a launch of `config` is kept running (on any hosts): its next run is a
        window, not a start (what the search's reserve prices it at, search/reserve.py)."""
        part = launch_part(config).key()
        return any(key.split("@", 1)[0] == part for key in self.open)

    def _held(self, key: str) -> AnySession | None:
        """The healthy session of this launch, taken out of the kept ones (None: start one;
        an unhealthy one has ended)."""
        held = self.open.pop(key, None)
        if held is not None and held[0].healthy():
            return held[0]
        return None

    def _keep(self, key: str, session: AnySession) -> None:
        if session.alive:
            self.open[key] = (session, time.monotonic())
        while len(self.open) > self.max_open:
            self._close_oldest()

    def _close_spinning(self, but: set[str]) -> None:
        now = time.monotonic()
        for key, (session, since) in list(self.open.items()):
            if key not in but and (not session.healthy() or session.spins(now - since)):
                self.open.pop(key)
                session.close()

    def _make_room(self) -> None:
        while self.open and _memory_short():
            self._close_oldest()

    def _close_oldest(self) -> None:
        _, (session, _) = self.open.popitem(last=False)
        session.close()

    def close(self) -> list[tuple[str, str]]:
        """End every session (the search is over, or interrupted); then a last try of the kills
        by marker a cut-off host still owes (run/unreached.py): (host, trial) of those that
        still did not reach theirs."""
        while self.open:
            self._close_oldest()
        return OWED.settle()


def _key(config: Config, where: Sequence[str]) -> str:
    key = launch_part(config).key()
    return f"{key}@{','.join(where)}" if where else key


def _wait_all(begun: list[tuple[SpanningSession, RunResult | None]]) -> list[RunResult]:
    """Each begun window's result, polled together until every one is over."""
    runs: list[RunResult | None] = [early for _s, early in begun]
    while any(r is None for r in runs):
        for i, (session, _early) in enumerate(begun):
            if runs[i] is None:
                runs[i] = session.poll()
        if any(r is None for r in runs):
            time.sleep(SPAN_POLL_S)
    return [r for r in runs if r is not None]


def _memory_short() -> bool:
    vm = psutil.virtual_memory()
    return vm.available < MIN_AVAILABLE_SHARE * vm.total
