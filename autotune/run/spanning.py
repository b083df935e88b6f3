"""Running cluster plans: launchers started here, ranks on the hosts, results on the shared file
system. Several plans may run at once on disjoint hosts (a math class's seeded quality runs, one
seed per host: quality/evidence.py); each is watched and torn down on its own, and an interrupt
tears down all of them.

A launch either runs its one window and exits (a fresh trial), or, when its request asks for a
session (serve_s > 0), stays and serves each next window asked through its trial folder, as on
one machine (run/session.py; run/spanning_session.py keeps it). Every launcher's stdin is a pipe
the runner holds and never writes: its end is each rank's lifeline (worker/lifeline.py).
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from typing import Any

from ..plan.cluster import MARKER
from ..util.search_path import child_env
from ..plan.launch_plan import LaunchPlan, WorkerRequest
from ..result import Outcome
from .outcome import RunResult
from .processes import exit_of
from .runner import (EXIT_LINGER_S, POLL_S, classify, ignored_note, open_trial, root_cause,
                     script_output)
from .trial_files import TrialFiles
from .unreached import OWED

# A rank of a kept launch that gave up on a window gets this long for its launcher to exit (its
# exit code then says what happened) before every host's share is ended.
EXIT_WAIT_S = 2.0
# How often the runner looks at a launch across hosts: its launchers and the shared folder.
SPAN_POLL_S = POLL_S * 2


class SpanningLaunch:
    """One plan's launchers, from their start to their teardown, and the window `n` being
    waited for: a fresh trial's only one, or each of a kept launch's (`ask`)."""

    def __init__(self, plan: LaunchPlan) -> None:
        self.plan = plan
        self.kept = plan.request.serve_s > 0 and not plan.script
        self.procs: list[subprocess.Popen[bytes]] = []
        self.launched_at, self.start = time.time(), time.monotonic()
        self.n, self.timeout_s = 0, plan.timeout_s
        self.timed_out, self.done_at = False, None
        self.stopped: set[int] | None = None     # launchers still running at teardown
        self.served: tuple[dict[str, Any], ...] | None = None   # window n's results, all ok
        self.wall = 0.0                          # launch (or ask) to the end of the window
        self.ignored_before = 0
        self.files = open_trial(plan)   # the folder on the shared file system, checked

    def launch(self) -> None:
        """Start the launchers, each writing to its log in the trial folder; their stdin is
        the ranks' lifeline, held here until the launch ends."""
        OWED.retry()   # kills a cut-off host still owes, in the background
        for _host, argv, log in self.plan.launchers:
            with open(self.files.open_file(log), "wb") as f:
                self.procs.append(subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.PIPE, env=child_env(),
                                                   start_new_session=True))

    def ask(self, request: WorkerRequest, timeout_s: float) -> None:
        """The next window of a kept launch that served its last one."""
        if not self.kept or self.stopped is not None or self.served is None:
            raise RuntimeError("this launch serves no further window")
        self.n += 1
        self.launched_at, self.start, self.timeout_s = time.time(), time.monotonic(), timeout_s
        self.done_at, self.served, self.ignored_before = None, None, self.files.ignored
        self.files.clear_results(self.n)
        self.files.write_request(self.n, request.to_json())

    def running(self) -> bool:
        """Every launcher still runs (a kept launch's window can still be served)."""
        return self.stopped is None and all(exit_of(p) is None for p in self.procs)

    def over(self) -> bool:
        """Whether window `n` is over: every rank's result is in and ok (`served`, for a kept
        launch, which goes on), or a launcher failed or exited, the timeout passed, or the
        results are in and the launchers had their time to exit."""
        if self.stopped is not None:
            return True
        codes = [exit_of(p) for p in self.procs]
        if any(c not in (None, 0) for c in codes) or all(c is not None for c in codes) or \
                (self.kept and any(c is not None for c in codes)):
            return True
        results = [self.files.result(r, self.n) for r in range(len(self.plan.ranks))]
        if self.kept and all(r is not None and r.get("status") == Outcome.OK for r in results):
            self.served = tuple(r for r in results if r is not None)
            self.wall = time.monotonic() - self.start
            if self.n == 0:   # every rank has read the token
                self.files.drop_token_file()
            return True
        now = time.monotonic()
        if now - self.start >= self.timeout_s:
            self.timed_out = True
            return True
        # a fresh trial's results are in, or a kept launch's rank gave up on its window
        if all(r is not None for r in results) or \
                (self.kept and any(r is not None and r.get("status") != Outcome.OK
                                   for r in results)):
            self.done_at = self.done_at or now
            return now - self.done_at >= (EXIT_WAIT_S if self.kept else EXIT_LINGER_S)
        return False

    def teardown(self) -> None:
        """Once: the launchers still running now are stopped by us (their ranks' deaths are not
        a cause), then nothing of the launch is left on any host."""
        if self.stopped is not None:
            return
        self.stopped = {i for i, p in enumerate(self.procs) if exit_of(p) is None}
        self.served = None
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            _teardown(self.plan, self.procs)
            self.files.drop_token_file()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
            self.wall = time.monotonic() - self.start

    def result(self) -> RunResult:
        """Window `n` as the runner saw it: served (ok), or the launch's end classified."""
        if self.served is not None:
            ignored = self.files.ignored - self.ignored_before
            return RunResult(outcome=Outcome.OK, exit_codes=(0,) * len(self.plan.ranks),
                             wall_seconds=self.wall, launched_at=self.launched_at,
                             rank_results=self.served, ignored=ignored,
                             notes=tuple(ignored_note(self.files)) if ignored else ())
        return _classified(self.plan, self.files, self.procs, self.stopped or set(),
                           self.timed_out, self.launched_at, self.wall, window=self.n)

    def close(self) -> None:
        self.files.close()


def run_cluster_plans(plans: list[LaunchPlan]) -> list[RunResult]:
    """Start every plan's launchers here, wait for each trial's ranks (results on the shared file
    system), and leave no process of any trial on any host, whatever happened. The plans must
    span disjoint hosts."""
    running: list[SpanningLaunch] = []
    try:
        for plan in plans:
            running.append(SpanningLaunch(plan))
            running[-1].launch()
        while True:
            for r in running:
                if r.stopped is None and r.over():
                    r.teardown()
            if all(r.stopped is not None for r in running):
                break
            time.sleep(SPAN_POLL_S * 2)
    finally:
        for r in running:
            r.teardown()
    try:
        return [r.result() for r in running]
    finally:
        for r in running:
            r.close()


def run_cluster_plan(plan: LaunchPlan) -> RunResult:
    return run_cluster_plans([plan])[0]


def _classified(plan: LaunchPlan, files: TrialFiles, procs: list[subprocess.Popen[bytes]],
                stopped: set[int], timed_out: bool, launched_at: float, wall: float,
                window: int = 0) -> RunResult:
    """The trial's (or the kept launch's window's) outcome from its launchers' exit codes and
    its ranks' results and logs."""
    codes = [exit_of(p) for p in procs]
    per_host = len(plan.ranks) // max(1, len(procs))
    host_of = [min(r // per_host, len(codes) - 1) for r in range(len(plan.ranks))]
    rank_codes = [codes[h] for h in host_of]
    signalled = {r for r, h in enumerate(host_of) if h in stopped}
    results: list[Any] = [files.result_of(r, rank_codes[r], window)
                          for r in range(len(plan.ranks))]
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
        for (host, argv, log), code in zip(plan.launchers, codes):
            if code not in (0, None):
                text = files.file_tail(log, 8)
                log_tail += f"\n--- launcher on {host} (exit {code}) ---\n{text}"
                # the ranks never started, or ssh itself gave up (255: the connection to the
                # host dropped or timed out; its ranks' exit is not what ended them)
                if outcome == Outcome.CRASH and (not any(tails) or (code == 255 and
                                                                    argv[0] == "ssh")):
                    last = text.strip().splitlines()[-1] if text.strip() else \
                        (f"exit {code}" if code != 255 else "ssh exited 255 without a word (the "
                         "connection to the host dropped, or the host stopped answering)")
                    reason = f"launcher on {host} failed: {last}"
    return RunResult(outcome=outcome, reason=reason, log_tail=log_tail,
                     exit_codes=tuple(rank_codes), wall_seconds=wall, launched_at=launched_at,
                     rank_results=tuple(r if isinstance(r, dict) else {} for r in results),
                     notes=tuple(ignored_note(files)), ignored=files.ignored,
                     tails=tuple(tails), **script_output(files))


def _teardown(plan: LaunchPlan, procs: list[subprocess.Popen[bytes]]) -> None:
    """Stop the launchers here, then kill by the trial's marker on every host: an ssh client's
    death does not reach what it started remotely (the ranks' lifeline ends them too, once the
    launchers' stdin is closed)."""
    for p in procs:
        if exit_of(p) is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        if p.stdin is not None:
            with contextlib.suppress(OSError):
                p.stdin.close()
    deadline = time.monotonic() + plan.grace_s
    while any(exit_of(p) is None for p in procs) and time.monotonic() < deadline:
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
    marker = plan.ranks[0].env.get(MARKER, "") if plan.ranks else ""
    for argv, host, k in zip(plan.host_kill, plan.kill_hosts, killers):
        if k.returncode != 0:   # the host was not reached: owed until it is (run/unreached.py)
            OWED.owe(host, marker, argv)
    OWED.retry()
    for p in procs:   # none reaped yet (exit_of): each pid still names our launcher's group
        if p.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
        p.wait()
