"""A launch that stays alive between its timed windows (run/session.py, worker/session.py), with
real ranks on this machine: windows of other window knobs and quality runs without a new start,
a new launch for a launch-level knob, a window asking for another launch refused, a rank killed
while idle, and nothing left behind by `close`."""
from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from autotune.config import Config
from autotune.probe import probe
from autotune.result import Outcome
from autotune.run.evaluate import live_evaluator
from autotune.run.session import SERVE_S, Session
from autotune.run.trial import TrialSettings, plan_trial


@pytest.fixture(scope="module")
def topology():
    return probe(None)


def _left_behind(root) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter():
        try:
            if str(root) in (p.environ().get("AUTOTUNE_RESULT") or ""):
                out.append(p)
        except psutil.Error:
            pass
    return out


def test_windows_of_a_launch_run_in_its_processes_and_a_new_launch_starts_anew(topology, tmp_path):
    ev = live_evaluator(topology, TrialSettings(target_seconds=0.5, accuracy_samples=256,
                                                timeout_s=120.0, results_dir=str(tmp_path)))
    try:
        first = ev(Config(threads=2), "throughput")
        bf16 = ev(Config(threads=2, precision="bf16"), "throughput")
        again = ev(Config(threads=2), "throughput")
        quality = ev(Config(threads=2), "accuracy", seed=1)
        other = ev(Config(threads=1), "throughput")
        assert all(o.outcome == Outcome.OK for o in (first, bf16, again, quality, other)), \
            [o.reason for o in (first, bf16, again, quality, other)]
        assert ev.warm.starts == 2 and ev.warm.windows == 3
        # a start pays for the interpreter, torch and the group; a window only for its model
        assert set(first.fixed) == set(other.fixed) == {"start", "imports", "group", "model",
                                                        "warmup"}
        assert set(bf16.fixed) == set(again.fixed) == {"wait", "model", "warmup"}
        assert quality.accuracy is not None and 0.0 <= quality.accuracy <= 1.0
        assert len(ev.warm.open) == 2
    finally:
        ev.close()
    assert _left_behind(tmp_path) == []


def test_a_window_asking_for_another_launch_is_refused_and_ends_the_session(topology, tmp_path):
    settings = TrialSettings(target_seconds=0.5, timeout_s=120.0, results_dir=str(tmp_path))
    plan = plan_trial(Config(threads=1), topology, settings)
    session = Session(plan.__class__(**{**plan.__dict__, "request": plan.request.__class__(
        **{**plan.request.__dict__, "serve_s": SERVE_S})}))
    try:
        assert session.start().ok
        other = plan_trial(Config(threads=1, binding="taskset"), topology, settings).request
        run = session.window(other, timeout_s=60.0)
        assert run.outcome == Outcome.BAD_CONFIG
        assert "another launch" in run.reason
        assert not session.alive
    finally:
        session.close()
    assert _left_behind(tmp_path) == []


def test_a_rank_killed_while_idle_gets_its_launch_started_again(topology, tmp_path):
    ev = live_evaluator(topology, TrialSettings(target_seconds=0.5, timeout_s=120.0,
                                                results_dir=str(tmp_path)))
    try:
        assert ev(Config(threads=1), "throughput").ok
        (session, _), = ev.warm.open.values()
        os.kill(session.trial.procs[0].pid, signal.SIGKILL)
        pid = session.trial.procs[0].pid
        # dead and not reaped, the session's own look must see it: waitable once every thread of
        # the rank has exited (its leader shows as a zombie before that)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not os.waitid(
                os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
            time.sleep(0.05)
        out = ev(Config(threads=1, precision="bf16"), "throughput")
        assert out.ok, out.reason
        assert ev.warm.starts == 2 and ev.warm.windows == 0
    finally:
        ev.close()
    assert _left_behind(tmp_path) == []


def test_a_launch_that_polls_while_idle_is_closed_before_the_next_window(topology, tmp_path,
                                                                         monkeypatch):
    """Its ranks keep a thread busy between windows (tests/idle_spinner.py, as a backend's
    polling progress thread would): kept, it would take the cores of the next launch timed."""
    from paths import REPO, TESTS
    monkeypatch.setenv("PYTHONPATH", f"{TESTS}{os.pathsep}{REPO}")
    settings = TrialSettings(workload="idle_spinner:build", target_seconds=0.5,
                             timeout_s=120.0, results_dir=str(tmp_path))
    quiet = TrialSettings(target_seconds=0.5, timeout_s=120.0, results_dir=str(tmp_path))
    spinning, ev = live_evaluator(topology, settings), live_evaluator(topology, quiet)
    ev.warm = spinning.warm    # one search's kept launches: each evaluator's trials among them
    try:
        assert spinning(Config(threads=1), "throughput").ok
        (poller, _), = ev.warm.open.values()
        time.sleep(3)
        assert poller.spins(3.0)
        # closed before the next window of another launch is timed
        assert ev(Config(threads=1, binding="taskset"), "throughput").ok
        (calm, _), = ev.warm.open.values()
        assert not poller.alive and calm is not poller
        time.sleep(3)
        assert not calm.spins(3.0)
        assert ev(Config(threads=2), "throughput").ok
        assert calm in [s for s, _ in ev.warm.open.values()]
    finally:
        spinning.close()
        ev.close()
    assert _left_behind(tmp_path) == []
