"""The processes of one running plan: every rank spawned as the leader of its own session, its
exit read without reaping it, its descendants tracked, and all of them ended (SIGTERM, then
SIGKILL after the grace period) so that none outlives the trial or the launch. run/runner.py
(trials) and run/attached.py (a launch in the foreground) drive it.

Rank exits are read with waitid(WNOWAIT): the leader stays a zombie until the end, so its pid,
and with it the process-group id we signal, cannot be reused by an unrelated process meanwhile.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator

import psutil

from ..plan.launch_plan import LaunchPlan
from ..util.process_identity import RUNNER_ENV, mark

POLL_S = 0.05
_SCAN_S = 0.25           # how often descendants are looked for (exits are checked every poll)


def cpu_seconds(procs: Iterator[psutil.Process] | list[psutil.Process]) -> float:
    """CPU seconds (user and system) these processes have used so far; a gone one adds none."""
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            continue
    return total


def _peek_exit(pid: int) -> int | None:
    """Exit status without reaping (the zombie keeps the pgid from being reused)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return None
    if info is None or info.si_pid == 0:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def exit_of(proc: subprocess.Popen) -> int | None:
    """A child's exit status, Popen-style, without reaping it (poll() would): until the caller
    reaps it with wait(), its pid, and the process group it leads, stay ours."""
    return proc.returncode if proc.returncode is not None else _peek_exit(proc.pid)


def alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


_PR_SET_PDEATHSIG = 1
try:
    import ctypes
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):      # not Linux: ranks then outlive a killed autotune
    _prctl = None


def _end_with_parent() -> None:
    """Runs in the forked rank before exec: SIGTERM it when autotune dies, even by SIGKILL, which
    no handler of ours sees. Every rank leads its own session, so without this a killed `autotune
    launch` left its ranks running, and a hung pair spun on both cores for the rest of a CI run.
    SIGTERM rather than SIGKILL, so that a torchrun or mpirun rank still ends its own children."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class Processes:
    """The processes of one running plan, and how to make sure none of them outlives it."""

    def __init__(self, plan: LaunchPlan) -> None:
        self.plan = plan
        self.procs: list[subprocess.Popen[bytes]] = []
        self.codes: list[int | None] = [None] * len(plan.ranks)
        self.exit_order: list[int] = []
        self.signalled: set[int] = set()
        self.ended: set[int] = set()                 # ranks ended as stuck after a clean exit
        self.known: dict[int, psutil.Process] = {}   # every descendant ever seen, by pid
        self.rank_procs: list[psutil.Process] = []
        self.scanned_at = 0.0

    def spawn(self, env: dict[str, str] | None = None) -> None:
        """Start every rank, its output through a pipe (a Tee copies it to the log, capped for a
        trial). Each rank's env names this runner (its mark), so that reap_orphans can tell
        whether the process that started it still runs; `env`: what else the runner adds (a
        trial's token and folder, run/trial_files.py)."""
        added = env if env is not None else {RUNNER_ENV: mark()}
        for rp in self.plan.ranks:
            self.procs.append(subprocess.Popen(
                rp.argv, env={**rp.env, **added}, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=_end_with_parent))
            with contextlib.suppress(psutil.Error):
                self.rank_procs.append(psutil.Process(self.procs[-1].pid))

    def poll(self) -> list[int]:
        """Record ranks that exited since the last poll, and remember every live descendant."""
        new = []
        for r, p in enumerate(self.procs):
            if self.codes[r] is None and (code := _peek_exit(p.pid)) is not None:
                self.codes[r] = code
                self.exit_order.append(r)
                new.append(r)
        if new or time.monotonic() - self.scanned_at >= _SCAN_S:
            self._scan()
        return new

    def _scan(self) -> None:
        # One pass over the process table for all ranks: on a big server it costs milliseconds,
        # taken from the cores the trial is being timed on, hence not every poll.
        self.scanned_at = time.monotonic()
        kids: dict[int, list[psutil.Process]] = {}
        for proc in psutil.process_iter(["ppid"]):
            kids.setdefault(proc.info["ppid"], []).append(proc)
        stack = [p.pid for p in self.procs]
        while stack:
            for child in kids.get(stack.pop(), ()):
                self.known.setdefault(child.pid, child)
                stack.append(child.pid)

    def tracked(self) -> list[psutil.Process]:
        """Every process of the trial seen so far: the ranks and their descendants."""
        return [*self.rank_procs, *self.known.values()]

    def running(self) -> list[int]:
        return [r for r, c in enumerate(self.codes[:len(self.procs)]) if c is None]

    def _signal_all(self, sig: int) -> None:
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, sig)
        for proc in self.known.values():
            with contextlib.suppress(psutil.Error):
                proc.send_signal(sig)   # psutil checks the pid still names the same process

    def teardown(self, grace: float) -> None:
        """SIGTERM every group and descendant, wait up to `grace`, then SIGKILL what is left."""
        self.poll()
        self._scan()
        self.signalled.update(self.running())
        self._signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            self.poll()
            if not self.running() and not any(alive(p) for p in self.known.values()):
                break
            time.sleep(POLL_S)
        self._signal_all(signal.SIGKILL)

    def end(self, ranks: list[int], grace: float) -> None:
        """SIGTERM these ranks' groups (stuck ones: the others keep running), SIGKILL after
        `grace`. Their deaths are the runner's doing, not a failure of theirs."""
        self.ended.update(ranks)
        self.signalled.update(ranks)
        for r in ranks:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.procs[r].pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(self.codes[r] is None for r in ranks):
            self.poll()
            time.sleep(POLL_S)
        for r in ranks:
            if self.codes[r] is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.procs[r].pid, signal.SIGKILL)

    def failed_alone(self, new: list[int]) -> bool:
        """A rank among `new` exited non-zero on its own (not one the runner ended)."""
        return any(self.codes[r] != 0 for r in new if r not in self.ended)

    def sweep(self) -> None:
        """Last line of defence: kill anything still carrying this trial's env, then reap ranks."""
        self._signal_all(signal.SIGKILL)
        markers = {rp.result_path for rp in self.plan.ranks}
        sessions = {p.pid for p in self.procs}
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error, OSError):
                if proc.pid != os.getpid() and (os.getsid(proc.pid) in sessions or
                                                proc.environ().get("AUTOTUNE_RESULT") in markers):
                    proc.kill()
                    self.known.setdefault(proc.pid, proc)
        for r, p in enumerate(self.procs):
            with contextlib.suppress(subprocess.TimeoutExpired):  # unkillable (D state): give up
                code = p.wait(timeout=5)
                if self.codes[r] is None:
                    self.codes[r] = code
        psutil.wait_procs([p for p in self.known.values() if alive(p)], timeout=2)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold Ctrl-C/SIGTERM during cleanup; they are delivered (and raise) once it is done."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
