"""Attached runs (`autotune launch`): a plan in the foreground with no time limit, output teed
with a rank prefix, signals forwarded to every rank, and the others stopped when one fails."""
from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..plan.launch_plan import LaunchPlan
from ..util.private_files import private_dir, private_file
from .idle import IDLE_DEADLINE_S, IdleWatch, Stuck
from .processes import POLL_S, Processes, signals_held


# Forwarded to every rank's process group, as torchrun does; the first four also stop the launch.
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
             signal.SIGUSR2)


_STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


@dataclass(frozen=True, kw_only=True)
class Attached:
    """How an attached run ended: exit codes by rank (negative: killed by that signal)."""
    exit_codes: tuple[int | None, ...]
    stopped_by_us: tuple[int, ...] = ()     # ranks the runner signalled after another failed
    received: tuple[int, ...] = ()          # signals received and forwarded
    wall_seconds: float = 0.0
    stuck: tuple[Stuck, ...] = ()           # ranks ended idle after another's clean exit


def run_attached(plan: LaunchPlan, *, echo: TextIO | None = None,
                 on_start: Callable[[list[int]], None] | None = None,
                 on_poll: Callable[[], None] | None = None,
                 idle_s: float = IDLE_DEADLINE_S) -> Attached:
    """Run `plan` in the foreground with no time limit (a launch, not a trial): output teed to
    the rank logs and `echo` with a rank prefix, signals forwarded, and when one rank fails the
    others are stopped (they would wait in a collective forever). `on_poll` runs every poll while
    ranks run (the launch's in-force check). A rank idle for `idle_s` after another exited
    cleanly is ended (run/idle.py), the others left running. Call from the main thread."""
    from .tee import Tee, prefix
    for rp in plan.ranks:
        private_dir(Path(rp.log_path).parent)
        os.close(private_file(rp.log_path))
    trial, tee = Processes(plan), Tee(echo)
    received: list[int] = []
    stuck: list[Stuck] = []

    def forward(signum: int, _frame: Any) -> None:
        received.append(signum)
        for p in trial.procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signum)

    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    start = time.monotonic()
    try:
        trial.spawn()
        for rp, p in zip(plan.ranks, trial.procs):
            assert p.stdout is not None
            tee.follow(p.stdout, rp.log_path, prefix(rp.rank, len(plan.ranks)))
        if on_start is not None:
            on_start([p.pid for p in trial.procs])
        stuck += _watch(trial, received, idle_s, on_poll)
    finally:
        with signals_held():
            for s, handler in previous.items():
                signal.signal(s, handler)
            if trial.running():
                trial.teardown(min(plan.grace_s, 2.0))
            trial.sweep()
            tee.join()
    return Attached(exit_codes=tuple(trial.codes), stopped_by_us=tuple(sorted(trial.signalled)),
                    received=tuple(received), wall_seconds=time.monotonic() - start,
                    stuck=tuple(stuck))


def _watch(trial: Processes, received: list[int], idle_s: float,
           on_poll: Callable[[], None] | None) -> list[Stuck]:
    """Poll until the ranks are done, one fails alone (the others are stopped), or the user's
    stop signals have had their grace period; returns the ranks ended as stuck."""
    plan = trial.plan
    stuck: list[Stuck] = []
    watch = IdleWatch([p.pid for p in trial.procs], [rp.log_path for rp in plan.ranks], idle_s)
    stop_at: float | None = None
    while trial.running():
        new = trial.poll()
        stops = [s for s in received if s in _STOPPING]
        # After the user's Ctrl-C, ranks exiting non-zero is expected: the others keep their
        # grace period (to save a checkpoint, say) instead of getting SIGTERM at once.
        if not stops and trial.failed_alone(new):
            trial.teardown(plan.grace_s)
            break
        if not stops and (found := watch.check(trial.codes, trial.exit_order)):
            stuck += found
            trial.end([s.rank for s in found], plan.grace_s)
            continue
        if stops and stop_at is None:   # the ranks got the signal; give them time to stop
            stop_at = time.monotonic() + plan.grace_s
        if len(stops) > 1 or (stop_at is not None and time.monotonic() > stop_at):
            trial.teardown(0.5 if len(stops) > 1 else plan.grace_s)
            break
        if on_poll is not None:
            on_poll()
        time.sleep(POLL_S)
    return stuck
