"""Run a LaunchPlan: the one module that spawns, watches and kills trial processes.

Every rank leads its own session, so `killpg(rank_pid)` reaches what the rank started (numactl's
python, torch.compile workers). A descendant that calls setsid itself escapes its group, so
descendants are also tracked by pid while the trial runs, and a final sweep kills any process whose
environment names one of this trial's result files (children inherit the env, daemons too).
Rank exits are read with waitid(WNOWAIT): the leader stays a zombie until the end, so its pid, and
with it the process-group id we signal, cannot be reused by an unrelated process meanwhile.
"""
from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psutil

from .classify import classify, declared_outcome, describe_exit, rank_failure, root_cause
from .cpu_ledger import CpuLedger, trial_cpus
from .idle import IDLE_DEADLINE_S, IdleWatch
from ..comm.ccl.shm import SegmentRecord, clean_recorded
from ..util.process_identity import RUNNER_ENV, alive, machine, parse_mark
from ..plan.launch_plan import LaunchPlan
from ..result import Outcome
from .outcome import RunResult, folder_refused
from .processes import POLL_S, Processes, signals_held
from .rank_output import _MAX_TAIL_RANKS
from .tee import MAX_LOG_BYTES, Tee
from .trial_files import SCRIPT_LOG_BYTES, TrialFiles
from ..util.checked_folder import FolderRefused

__all__ = ["Interrupted", "classify", "end_ranks", "free_port", "interrupt_on_sigterm",
           "judged", "prepare_launch", "reap_orphans", "root_cause", "run_plan", "start_ranks",
           "Launch", "ignored_note", "open_trial", "script_output"]

# Ranks that wrote their result but hang in gloo teardown get this long to exit, then are killed;
# the measurement already stands.
EXIT_LINGER_S = 2.0


class Interrupted(KeyboardInterrupt):
    """SIGTERM turned into the same exception as Ctrl-C, so the search handles both in one place.

    A KeyboardInterrupt, not an AutotuneError: an `except Exception` (Optuna's trial wrapper has
    one) must never swallow the user stopping the search.
    """

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


@contextlib.contextmanager
def interrupt_on_sigterm() -> Iterator[None]:
    """While active (main thread only), SIGTERM raises Interrupted; the previous handler returns."""
    def _raise(signum: int, _frame: Any) -> None:
        raise Interrupted(signum)
    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the rendezvous binds it moments later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- logs and results


def reap_orphans(results_root: str) -> list[int]:
    """Kill what a runner that died (kill -9) left behind under `results_root`; returns the pids.

    A trial process is recognised by its AUTOTUNE_RESULT under the root. It is an orphan only when
    the exact runner that started it (the mark in its env, inherited by everything the rank
    starts) no longer runs. Never judged by process names: the runner of a search started beside
    this one (--allow-concurrent, `autotune run`) is a live process named `autotune`, and its
    ranks were killed mid-trial when a name decided. A process without a mark (started by another
    version, or a remote rank) or from another machine or pid namespace is left alone: nothing
    here can tell whether its runner lives. Meant for the search's start.
    """
    root = os.path.join(os.path.realpath(results_root), "")
    killed = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            env = proc.environ()
            marker = env.get("AUTOTUNE_RESULT")
            if not marker or not os.path.realpath(marker).startswith(root):
                continue
            if _runner_gone(env.get(RUNNER_ENV, "")) and proc.pid != os.getpid():
                proc.kill()
                killed.append(proc.pid)
    return killed


def _runner_gone(runner_mark: str) -> bool:
    """True only when the runner named by `runner_mark` is known to have ended."""
    runner = parse_mark(runner_mark)
    if runner is None or runner[0] != machine():
        return False
    return not alive(runner[1], runner[2])


def run_plan(plan: LaunchPlan, *, on_start: Callable[[list[int]], None] | None = None,
             idle_s: float = IDLE_DEADLINE_S) -> RunResult:
    """Run every rank of `plan`, classify the outcome; no process of the trial survives the call.

    A rank idle for `idle_s` after another exited cleanly is ended (run/idle.py); a script's rank
    ended so counts as finished, and the result's notes say so (0: never end idle ranks).

    A KeyboardInterrupt (Ctrl-C, or Interrupted from interrupt_on_sigterm) propagates, but only
    after every process of the trial is gone.
    """
    launched_at, start = time.time(), time.monotonic()
    try:
        launch = prepare_launch(plan)
    except FolderRefused as exc:   # nothing started, nothing written
        return folder_refused(exc, launched_at)
    trial = Processes(plan)
    ledger = CpuLedger(trial_cpus(plan))
    timed_out, notes, spawn_error = False, [], ""
    tee = Tee(None, cap=MAX_LOG_BYTES)
    try:
        try:
            spawn_error = start_ranks(trial, tee, launch.files)
            if on_start is not None and not spawn_error:
                on_start([p.pid for p in trial.procs])
            if not spawn_error:
                timed_out, notes = _watch(trial, ledger, launch, idle_s, start)
            ledger.sample(trial.tracked(), force=True)
        finally:
            with signals_held():
                end_ranks(trial, tee, launch.segments)
        if spawn_error:
            return RunResult(outcome=Outcome.CRASH, reason=spawn_error,
                             exit_codes=tuple(trial.codes),
                             wall_seconds=time.monotonic() - start, launched_at=launched_at)
        return judged(plan, trial, launch.files, timed_out=timed_out, notes=notes,
                      ledger=ledger, wall_seconds=time.monotonic() - start,
                      launched_at=launched_at)
    finally:
        launch.files.close()


@dataclass
class Launch:
    """What the runner holds of a launch it prepared: its trial folder and, for a ccl launch,
    the record of its shared-memory segments."""
    files: TrialFiles
    segments: SegmentRecord | None


def prepare_launch(plan: LaunchPlan) -> Launch:
    """Before the ranks start: the trial folder made and checked (FolderRefused when someone
    else could change it), the request written into it, no stale result, and for a ccl launch
    the record of its shared-memory segments."""
    files = open_trial(plan)
    try:
        # a killed rank's segment under a reused pid fails the next init (comm/ccl/shm.py)
        segments = segment_record(plan, files) if plan.request.config.get("backend") == "ccl" \
            else None
    except BaseException:
        files.close()
        raise
    return Launch(files, segments)


def open_trial(plan: LaunchPlan) -> TrialFiles:
    """The trial folder made and checked, the launch's request in it and no stale result."""
    files = TrialFiles.open(plan)
    try:
        files.write_request(0, plan.request.to_json())
        files.clear_results(0)
    except BaseException:
        files.close()
        raise
    return files


def _watch(trial: Processes, ledger: CpuLedger, launch: Launch, idle_s: float,
           start: float) -> tuple[bool, list[str]]:
    """Poll the running ranks until they are done, one fails (the others may wait in a
    collective forever), the plan's timeout passes, or every result is in and the ranks linger
    in teardown; ranks stuck after a peer's clean exit are ended. Returns (timed out, notes)."""
    plan, files = trial.plan, launch.files
    watch = IdleWatch([p.pid for p in trial.procs],
                      [functools.partial(files.log_size, r) for r in range(len(plan.ranks))],
                      idle_s)
    notes: list[str] = []
    all_results_at: float | None = None
    while True:
        ledger.sample(trial.tracked())
        if launch.segments is not None:
            launch.segments.watch(p.pid for p in trial.tracked())
        failed = any(rank_failure(r, trial.codes[r], files.result_of(r, trial.codes[r]))
                     for r in trial.poll() if r not in trial.ended)
        if not trial.running():
            return False, notes
        now = time.monotonic()
        if not failed and (stuck := watch.check(trial.codes, trial.exit_order)):
            trial.end([s.rank for s in stuck], plan.grace_s)
            notes += [s.message for s in stuck]
            continue
        if failed or now - start >= plan.timeout_s:
            trial.teardown(plan.grace_s)
            return not failed, notes
        if not plan.script and all(files.result(r) is not None for r in range(len(plan.ranks))):
            all_results_at = all_results_at or now
            if now - all_results_at >= EXIT_LINGER_S:
                trial.teardown(plan.grace_s)
                return False, notes
        time.sleep(POLL_S)


def start_ranks(trial: Processes, tee: Tee, files: TrialFiles) -> str:
    """Spawn every rank, its output through the tee into its log in the trial folder, which
    caps each log (run/tee.py: a rank writing straight to its file could fill the disk under the
    results folder); returns why a rank could not be started, or ""."""
    try:
        logs = [files.open_log(r) for r in range(len(trial.plan.ranks))]
    except OSError as e:     # a name taken in a folder just made: something else writes there
        return f"the ranks' logs could not be created in {files.folder.path}: {e}"
    try:
        trial.spawn(files.env())
    except OSError as e:    # a plan naming a missing binary is a failed trial, not a crash
        return f"rank {len(trial.procs)} could not be started: {e}"
    finally:
        for r, log in enumerate(logs):
            if r < len(trial.procs):
                tee.follow(trial.procs[r].stdout, log, "")   # type: ignore[arg-type]
            else:
                os.close(log)
    return ""


def end_ranks(trial: Processes, tee: Tee, segments: SegmentRecord | None) -> None:
    """No process of the trial left, its logs complete, its oneCCL segments removed."""
    if segments is not None:   # what was mapped since the last look
        segments.watch((p.pid for p in trial.tracked()), force=True)
    if trial.running():
        trial.teardown(min(trial.plan.grace_s, 2.0))
    trial.sweep()
    tee.join()
    if segments is not None:
        segments.clean()


def segment_record(plan: LaunchPlan, files: TrialFiles) -> SegmentRecord:
    """Settle the records earlier trials of this results folder left (a runner killed with
    kill -9 among them), then start this trial's, before launch."""
    clean_recorded(os.path.dirname(files.folder.path))
    return SegmentRecord(files.folder)


def judged(plan: LaunchPlan, trial: Processes, files: TrialFiles, *, timed_out: bool,
           notes: list[str], ledger: CpuLedger, wall_seconds: float, launched_at: float,
           window: int = 0) -> RunResult:
    """The finished trial (or a session's `window`) classified, with the failing rank's log
    tail and the notes on what happened after training (ranks ended as stuck, a crash after the
    result was in, files in the trial folder that were not the launch's)."""
    results: list[Any] = [files.result_of(r, trial.codes[r], window)
                          for r in range(len(plan.ranks))]
    for r in trial.ended:   # a script's rank stuck after a peer's clean exit had finished training
        if plan.script and results[r] is None:
            results[r] = {"status": Outcome.OK, "script": True}
    tails = [files.tail(r) for r in range(len(plan.ranks))]
    outcome, reason = classify(trial.codes, results, tails, timed_out, exit_order=trial.exit_order,
                               signalled=trial.signalled, timeout_s=plan.timeout_s)
    if outcome == Outcome.OK:
        notes = notes + [f"{describe_exit(r, c)} after its result was in (in teardown); the "
                         "measurement stands" for r, c in enumerate(trial.codes)
                         if c not in (0, None) and r not in trial.signalled]
    log_tail = ""
    if outcome != Outcome.OK:
        root = root_cause(trial.codes, results, tails, exit_order=trial.exit_order,
                          signalled=trial.signalled)
        shown = [root] if root is not None else [   # no single culprit: those without a success
            r for r, res in enumerate(results)
            if not isinstance(res, dict) or declared_outcome(res)][:_MAX_TAIL_RANKS]
        log_tail = "\n".join(f"--- rank {r} ({plan.ranks[r].log_path}) ---\n{tails[r]}"
                             for r in shown)
    return RunResult(outcome=outcome, reason=reason, log_tail=log_tail,
                     exit_codes=tuple(trial.codes), wall_seconds=wall_seconds,
                     launched_at=launched_at, notes=tuple(notes + ignored_note(files)),
                     ignored=files.ignored, tails=tuple(tails), **script_output(files),
                     signalled=tuple(sorted(trial.signalled)),
                     cpu_samples=tuple(ledger.samples), num_cpus=len(ledger.cpus),
                     rank_results=tuple(r if isinstance(r, dict) else {} for r in results))


def ignored_note(files: TrialFiles) -> list[str]:
    """What the trial's notes say of the files in its folder that were not the launch's."""
    if not files.ignored:
        return []
    why = "; ".join(files.channel.reasons[:2]) or "requests its ranks did not take"
    return [f"{files.ignored} file(s) in the trial folder {files.folder.path} were not this "
            f"launch's and were ignored ({why})"]


def script_output(files: TrialFiles) -> dict[str, Any]:
    """A script's rank 0 output and report as RunResult fields ({} for the built-in worker)."""
    if not files.plan.script:
        return {}
    rank0 = files.plan.ranks[0]
    report = rank0.env.get("AUTOTUNE_REPORT")
    return {"script_log": files.log_bytes(0, SCRIPT_LOG_BYTES).decode("utf-8", "replace"),
            "script_report": files.report(report) if report else None}
