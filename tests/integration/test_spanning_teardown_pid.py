"""Issue 61, hole 5: a trial across hosts reaped its launchers with poll() before the kills by
marker (up to 30 s), then sent SIGKILL to their old pids' groups: a pid reused meanwhile by a new
group leader was someone else's group. Now a launcher that exited stays a zombie, its pid ours,
until teardown is done; real processes: a launcher that exits at once, one that runs on, and a
kill by marker that takes its time."""
from __future__ import annotations

import subprocess
import threading
import time

from autotune.plan.launch_plan import LaunchPlan, WorkerRequest
from autotune.run.processes import exit_of
from autotune.run.spanning import _teardown


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            return next(line.split()[1] for line in f if line.startswith("State:"))
    except FileNotFoundError:
        return None


def test_a_launcher_that_exited_keeps_its_pid_until_teardown_ends(tmp_path):
    started = tmp_path / "kill-by-marker-started"
    done = subprocess.Popen(["sh", "-c", "exit 3"], stdin=subprocess.PIPE,
                            start_new_session=True)
    running = subprocess.Popen(["sleep", "60"], stdin=subprocess.PIPE, start_new_session=True)
    while exit_of(done) is None:
        time.sleep(0.01)
    assert exit_of(done) == 3 and done.returncode is None and _state(done.pid) == "Z"
    plan = LaunchPlan(ranks=(), request_path="", request=WorkerRequest(
        workload="mlp", config={}, ranks=()), timeout_s=10, grace_s=0.3,
        host_kill=(("sh", "-c", f"touch {started}; sleep 1"),), kill_hosts=("h1",))
    teardown = threading.Thread(target=_teardown, args=(plan, [done, running]))
    teardown.start()
    while not started.exists():
        time.sleep(0.01)
    seen = _state(done.pid)        # while the kill by marker runs
    teardown.join(timeout=30)
    assert seen == "Z", f"the exited launcher's pid was reaped before teardown's end: {seen}"
    assert done.returncode == 3 and running.returncode is not None and running.returncode < 0
    assert _state(done.pid) is None and _state(running.pid) is None
