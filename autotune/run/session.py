"""A launch whose ranks stay alive between timed windows: the runner's side of a session
(worker/session.py is the ranks' side).

A trial costs a process start, imports, the process group, the model and the data pipeline
before its timed window: seconds on a CPU, 13-15 s beside a window of a few seconds on the GPU
machine (issue 44). A session pays that once per launch: its first window is started like any
trial, and each next window of the same launch (config.launch_part: another precision, batch or
pipeline setting, the same configuration again for a verification round, a seeded quality run)
is one request file the ranks are waiting for. Launch-level knobs still get their own processes.

The same guarantees as run_plan: every rank leads its own process group, a window past its
timeout or a failing rank tears the whole session down and is classified as a trial would be,
and `close` (or the parent's death, through the ranks' PDEATHSIG) leaves no process behind.
"""
from __future__ import annotations

import time
from dataclasses import replace

from ..plan.launch_plan import STOP_REQUEST, LaunchPlan, WorkerRequest
from ..result import Outcome
from ..util.checked_folder import FolderRefused
from .cpu_ledger import CpuLedger, trial_cpus
from .outcome import RunResult, folder_refused
from .processes import POLL_S, Processes, alive, cpu_seconds, signals_held
from .runner import Launch, end_ranks, ignored_note, judged, prepare_launch, start_ranks
from .tee import MAX_LOG_BYTES, Tee

# Above this share of a core used while it waits for its next window, a kept launch is closed: a
# Python polling its request file uses about 0.02 (gloo, oneCCL and oneCCL's `pause` alike, 2-core
# EPYC, 2026-11-28); a thread that polls uses all of a core.
IDLE_SHARE = 0.05
# How long an idle rank waits for its next window before it exits by itself: a search never
# leaves a session idle this long (it closes them), so only a runner that vanished does.
SERVE_S = 900.0
# A closed session's ranks get this long to exit on the stop request, then are ended.
CLOSE_GRACE_S = 3.0
# A rank that gave up on a window gets this long to exit on its own before all are ended.
EXIT_WAIT_S = 2.0


class Session:
    """One launch serving windows. `start` runs the plan's own window (its request must ask
    for a session: `serve_s` > 0); `window` each next one; `close` ends it."""

    def __init__(self, plan: LaunchPlan) -> None:
        if plan.script or plan.launchers or plan.request.serve_s <= 0:
            raise ValueError("a session serves the built-in worker on this machine, asked with "
                             "serve_s > 0")
        self.plan, self.windows = plan, 0
        self.trial = Processes(plan)
        self.tee = Tee(None, cap=MAX_LOG_BYTES)
        self.launch: Launch | None = None
        self.alive = self.ended = False
        self.idle_since_cpu: float | None = None

    def start(self) -> RunResult:
        """Spawn the ranks and wait for their first window."""
        launched_at = time.time()
        try:
            self.launch = prepare_launch(self.plan)
        except FolderRefused as exc:   # nothing started, nothing written
            self.ended = True
            return folder_refused(exc, launched_at)
        error = start_ranks(self.trial, self.tee, self.launch.files)
        if error:
            self.close()
            return RunResult(outcome=Outcome.CRASH, reason=error, launched_at=launched_at,
                             exit_codes=tuple(self.trial.codes))
        self.alive = True
        return self._wait(0, launched_at, self.plan.timeout_s)

    def window(self, request: WorkerRequest, timeout_s: float) -> RunResult:
        """The next window, asked by its request file; the session must be alive."""
        if not self.alive or self.launch is None:
            raise RuntimeError("this session has ended")
        self.windows += 1
        self.launch.files.clear_results(self.windows)
        self.launch.files.write_request(self.windows, request.to_json())
        return self._wait(self.windows, time.time(), timeout_s)

    def _wait(self, n: int, launched_at: float, timeout_s: float) -> RunResult:
        """Until every rank's result of window `n` is in (ok), or a rank fails or exits, or
        `timeout_s` passes: then the session ends and the window is classified."""
        try:
            return self._watch(n, launched_at, timeout_s)
        except BaseException:   # Ctrl-C, SIGTERM: no rank of the session outlives it
            self._end(grace_s=1.0)
            raise

    def _watch(self, n: int, launched_at: float, timeout_s: float) -> RunResult:
        assert self.launch is not None
        files, plan = self.launch.files, self.plan
        start, ignored_before = time.monotonic(), files.ignored
        ledger = CpuLedger(trial_cpus(plan))
        ledger.sample(self.trial.tracked(), force=True)
        timed_out = False
        while True:
            ledger.sample(self.trial.tracked())
            if self.launch.segments is not None:
                self.launch.segments.watch(p.pid for p in self.trial.tracked())
            self.trial.poll()
            results = [files.result(r, n) for r in range(len(plan.ranks))]
            if all(r is not None and r.get("status") == Outcome.OK for r in results):
                ledger.sample(self.trial.tracked(), force=True)
                self.idle_since_cpu = self.cpu_seconds()
                return RunResult(outcome=Outcome.OK, exit_codes=tuple(self.trial.codes),
                                 wall_seconds=time.monotonic() - start, launched_at=launched_at,
                                 cpu_samples=tuple(ledger.samples), num_cpus=len(ledger.cpus),
                                 rank_results=tuple(r for r in results if r is not None),
                                 ignored=files.ignored - ignored_before,
                                 notes=tuple(ignored_note(files))
                                 if files.ignored > ignored_before else ())
            gave_up = [i for i, r in enumerate(results)
                       if r is not None and r.get("status") != Outcome.OK]
            if gave_up or len(self.trial.running()) < len(plan.ranks):
                break   # a rank gave up on this window (its result says why) or exited
            if time.monotonic() - start >= timeout_s:
                timed_out = True
                break
            time.sleep(POLL_S)
        if not timed_out:
            self._let_exit(gave_up, EXIT_WAIT_S)
        self._end(grace_s=self.plan.grace_s if timed_out else 1.0)
        run = replace(judged(plan, self.trial, files, timed_out=timed_out, notes=[],
                             ledger=ledger, wall_seconds=time.monotonic() - start,
                             launched_at=launched_at, window=n),
                      exit_codes=tuple(self.trial.codes), ignored=files.ignored - ignored_before)
        files.close()
        return run

    def _let_exit(self, ranks: list[int], seconds: float) -> None:
        """A rank that gave up writes its result and exits at once: its exit code tells the
        classification what happened, as for a trial of its own (its peers, waiting in a
        collective, are ended right after)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and any(self.trial.codes[r] is None for r in ranks):
            self.trial.poll()
            time.sleep(POLL_S)

    def healthy(self) -> bool:
        """Alive with every rank still running (a rank killed while idle ends the session,
        which is then closed, and the next window of its launch starts a new one)."""
        if not self.alive:
            return False
        self.trial.poll()
        # a rank's leader shows as a zombie while its other threads still exit, before its exit
        # can be read: either one means the rank is gone
        if len(self.trial.running()) < len(self.plan.ranks) or \
                not all(alive(p) for p in self.trial.rank_procs):
            self._end(grace_s=1.0)
            return False
        return True

    def cpu_seconds(self) -> float:
        """CPU seconds the session's processes have used so far (an idle one should use none)."""
        return cpu_seconds(self.trial.tracked())

    def spins(self, idle_s: float) -> bool:
        """Whether, idle for `idle_s` since its last window, it used more than IDLE_SHARE of a
        core (oneCCL's progress threads can poll): it would take the cores of the next window."""
        if self.idle_since_cpu is None or idle_s <= 0:
            return False
        return (self.cpu_seconds() - self.idle_since_cpu) / idle_s > IDLE_SHARE

    def close(self) -> None:
        """Ask the ranks to stop, end what does not, and clean up after them."""
        if self.alive and self.launch is not None and self.trial.running():
            self.launch.files.write_request(self.windows + 1, STOP_REQUEST)
            deadline = time.monotonic() + CLOSE_GRACE_S
            while time.monotonic() < deadline and self.trial.running():
                self.trial.poll()
                time.sleep(POLL_S)
        self._end(grace_s=1.0)
        if self.launch is not None:
            self.launch.files.close()

    def _end(self, grace_s: float) -> None:
        self.alive = False
        if self.ended:
            return
        self.ended = True
        with signals_held():
            if self.trial.running():
                self.trial.teardown(grace_s)
            end_ranks(self.trial, self.tee, self.launch.segments if self.launch else None)
