"""Running cluster plans: launchers started here, ranks on the hosts, results on the shared file
system. Several plans may run at once on disjoint hosts (a math class's seeded quality runs, one
seed per host: quality/evidence.py); each is watched and torn down on its own, and an interrupt
tears down all of them.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from typing import Any

from ..plan.launch_plan import LaunchPlan
from ..result import Outcome
from .outcome import RunResult
from .runner import (EXIT_LINGER_S, POLL_S, classify, ignored_note, open_trial, root_cause,
                     script_output)
from .trial_files import TrialFiles


class _Running:
    """One plan's launchers, from start to teardown."""

    def __init__(self, plan: LaunchPlan) -> None:
        self.plan = plan
        self.procs: list[subprocess.Popen[bytes]] = []
        self.launched_at, self.start = time.time(), time.monotonic()
        self.timed_out, self.done_at = False, None
        self.stopped: set[int] | None = None     # launchers still running at teardown
        self.wall = 0.0                          # launch to the end of its teardown
        self.files = open_trial(plan)   # the folder on the shared file system, checked

    def launch(self) -> None:
        for _host, argv, log in self.plan.launchers:
            with open(self.files.open_file(log), "wb") as f:
                self.procs.append(subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL,
                                                   start_new_session=True))

    def over(self) -> bool:
        """Whether the trial is over: a launcher failed, all exited, the timeout passed, or
        every rank's result is there and the launchers had EXIT_LINGER_S to exit."""
        if self.stopped is not None:
            return True
        codes = [p.poll() for p in self.procs]
        if any(c not in (None, 0) for c in codes) or all(c is not None for c in codes):
            return True
        if time.monotonic() - self.start >= self.plan.timeout_s:
            self.timed_out = True
            return True
        if all(self.files.result(r) is not None for r in range(len(self.plan.ranks))):
            self.done_at = self.done_at or time.monotonic()
            return time.monotonic() - self.done_at >= EXIT_LINGER_S
        return False

    def teardown(self) -> None:
        """Once: the launchers still running now are stopped by us (their ranks' deaths are not
        a cause), then nothing of the trial is left on any host."""
        if self.stopped is not None:
            return
        self.stopped = {i for i, p in enumerate(self.procs) if p.poll() is None}
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            _teardown(self.plan, self.procs)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
            self.wall = time.monotonic() - self.start

    def result(self) -> RunResult:
        try:
            return _classified(self.plan, self.files, self.procs, self.stopped or set(),
                               self.timed_out, self.launched_at, self.wall)
        finally:
            self.files.close()


def run_cluster_plans(plans: list[LaunchPlan]) -> list[RunResult]:
    """Start every plan's launchers here, wait for each trial's ranks (results on the shared file
    system), and leave no process of any trial on any host, whatever happened. The plans must
    span disjoint hosts."""
    running: list[_Running] = []
    try:
        for plan in plans:
            running.append(_Running(plan))
            running[-1].launch()
        while True:
            for r in running:
                if r.stopped is None and r.over():
                    r.teardown()
            if all(r.stopped is not None for r in running):
                break
            time.sleep(POLL_S * 4)
    finally:
        for r in running:
            r.teardown()
    return [r.result() for r in running]


def run_cluster_plan(plan: LaunchPlan) -> RunResult:
    return run_cluster_plans([plan])[0]


def _classified(plan: LaunchPlan, files: TrialFiles, procs: list[subprocess.Popen[bytes]],
                stopped: set[int], timed_out: bool, launched_at: float, wall: float
                ) -> RunResult:
    """The trial's outcome from its launchers' exit codes and its ranks' results and logs."""
    codes = [p.returncode for p in procs]
    per_host = len(plan.ranks) // max(1, len(procs))
    host_of = [min(r // per_host, len(codes) - 1) for r in range(len(plan.ranks))]
    rank_codes = [codes[h] for h in host_of]
    signalled = {r for r, h in enumerate(host_of) if h in stopped}
    results: list[Any] = [files.result_of(r, rank_codes[r]) for r in range(len(plan.ranks))]
    rank_codes = [0 if isinstance(res, dict) and c is not None else c
                  for c, res in zip(rank_codes, results)]
    tails = [files.tail(r) for r in range(len(plan.ranks))]
    outcome, reason = classify(rank_codes, results, tails, timed_out, timeout_s=plan.timeout_s,
                               signalled=signalled)
    log_tail = ""
    if outcome != "ok":
        root = root_cause(rank_codes, results, tails, signalled=signalled)
        shown = [root] if root is not None else range(min(4, len(plan.ranks)))
        log_tail = "\n".join(f"--- rank {r} ({plan.ranks[r].log_path}) ---\n{tails[r]}"
                             for r in shown)
        for (host, _argv, log), code in zip(plan.launchers, codes):
            if code not in (0, None):
                text = files.file_tail(log, 8)
                log_tail += f"\n--- launcher on {host} (exit {code}) ---\n{text}"
                if not any(tails) and outcome == Outcome.CRASH:   # the ranks never started
                    last = text.strip().splitlines()[-1] if text.strip() else f"exit {code}"
                    reason = f"launcher on {host} failed: {last}"
    return RunResult(outcome=outcome, reason=reason, log_tail=log_tail,
                     exit_codes=tuple(rank_codes), wall_seconds=wall, launched_at=launched_at,
                     rank_results=tuple(r if isinstance(r, dict) else {} for r in results),
                     notes=tuple(ignored_note(files)), ignored=files.ignored,
                     tails=tuple(tails), **script_output(files))


def _teardown(plan: LaunchPlan, procs: list[subprocess.Popen[bytes]]) -> None:
    """Stop the launchers here, then kill by the trial's marker on every host: an ssh client's
    death does not reach what it started remotely."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + plan.grace_s
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    killers = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, start_new_session=True)
               for argv in plan.host_kill]
    for k in killers:
        try:
            k.wait(timeout=30)
        except subprocess.TimeoutExpired:
            k.kill()
            k.wait()
    for p in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
