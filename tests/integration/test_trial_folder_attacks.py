"""Issue 52: what a co-user who can rename a folder above `trials/` did to a running launch, each
reproduced with a real second uid and real folders, and now refused or inert.

A launch's ranks stay alive between windows (run/session.py); the runner writes each window's
request and the ranks write their results into the trial folder. The co-user moves the results
folder aside (it is in a folder they can write) and makes their own `trials/<id>/`, with:
- `link`: a link at each rank's `rank<N>.json.tmp.<pid>` to a file of the user's, and a bad
  request: the waiting rank crashed on it and wrote its crash result through the link (hole 1);
- `forged`: results with an invented throughput, kept in place: the runner took them (hole 2);
- `fifo`: FIFOs at the results' names: the runner's open() never returned (hole 3);
- `stop`: a request `{"stop": true}`: the ranks ended the session (hole 4).
Now the runner and the ranks hold the folder they checked (its descriptor) and never look at the
co-user's: the window is measured, the file is untouched, nothing is written into their folder.

And before any trial, a results folder someone else can rename is refused in one line with the
fix, exit 2, nothing written: in a folder others may write, owned by another user, and the
default `autotune-results` in a group-writable current folder.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from other_user import other_user  # noqa: F401  (the fixture)
from paths import REPO

AUTOTUNE = str(Path(sys.executable).with_name("autotune"))
SYSTEM_PYTHON = "/usr/bin/python3"     # the co-user's: they cannot reach the checkout's venv

# The runner, in a process of its own (a runner stuck in open() must not hang pytest): a session
# of one rank, its first window, then one more window once the co-user has had their go.
RUNNER = """
import json, os, sys, time
from dataclasses import replace
sys.path.insert(0, {repo!r})
from autotune.config import Config
from autotune.probe import probe
from autotune.run.session import SERVE_S, Session
from autotune.run.trial import TrialSettings, plan_trial
results, go = sys.argv[1], sys.argv[2]
settings = TrialSettings(target_seconds=0.3, timeout_s=60.0, results_dir=results)
plan = plan_trial(Config(nproc=1, threads=1), probe(None), settings)
plan = replace(plan, request=replace(plan.request, serve_s=SERVE_S))
session = Session(plan)
first = session.start()
print(json.dumps({{"first": first.outcome, "reason": first.reason, "trial": plan.workdir,
                  "pids": [p.pid for p in session.trial.procs]}}), flush=True)
while not os.path.exists(go):
    time.sleep(0.02)
run = session.window(replace(plan.request, serve_s=SERVE_S), 30.0)
r0 = run.rank_results[0] if run.rank_results else {{}}
print(json.dumps({{"window": run.outcome, "reason": run.reason,
                  "throughput": r0.get("throughput")}}), flush=True)
session.close()
"""

# The co-user's helper for the attacks that must keep their plants in place while the runner
# works (the runner removes a window's stale results before it writes the request).
KEEPER = """
import json, os, sys, time
folder, kind, stop = sys.argv[1], sys.argv[2], sys.argv[3]
forged = {"rank": 0, "world_size": 1, "status": "ok", "throughput": 1e9, "samples": 10**9,
          "step_times": [0.001] * 10, "warmup_times": [0.001], "window_seconds": 1.0,
          "timed_steps": 10, "in_force": {}, "timed_start_at": time.time(),
          "timed_end_at": time.time() + 1}
name = os.path.join(folder, "rank0.window1.json")
while not os.path.exists(stop):
    if not os.path.lexists(name):
        if kind == "fifo":
            os.mkfifo(name, 0o666)
        else:
            with open(name + ".tmp", "w") as f:
                json.dump(forged, f)
            os.replace(name + ".tmp", name)
    time.sleep(0.002)
"""


def _line(proc: subprocess.Popen[str], timeout: float) -> dict | None:
    """The next JSON line of `proc`, or None when none comes within `timeout`."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        return None
    line = proc.stdout.readline()  # type: ignore[union-attr]
    return json.loads(line) if line.strip() else None


def _plant(user, trial: Path, attack: str, pids: list[int], victim: Path) -> None:
    """As the co-user: their own trial folder in place of the runner's, with the attack's files."""
    user.run("mkdir", "-p", "-m", "777", str(trial))
    if attack == "link":
        for pid in pids:
            for name in (f"rank0.json.tmp.{pid}", f"rank0.window1.json.tmp.{pid}"):
                user.run("ln", "-s", str(victim), str(trial / name))
        user.run("sh", "-c", f"echo '{{\"x\": 1}}' > {trial / 'request.window1.json'}")
    elif attack == "stop":
        user.run("sh", "-c", f"echo '{{\"stop\": true}}' > {trial / 'request.window1.json'}")


@pytest.mark.slow
@pytest.mark.parametrize("attack", ["link", "forged", "fifo", "stop"])
def test_a_co_user_who_swaps_a_running_launchs_trial_folder_reaches_nothing(tmp_path, other_user,
                                                                            attack):
    # where the co-user can reach (pytest's folders are root's alone): /tmp/<ours, 755>/shared
    reach = Path(tempfile.mkdtemp(prefix="autotune-test-trial-"))
    reach.chmod(0o755)
    base = reach / "shared"
    base.mkdir(mode=0o755)          # the user's alone when the launch starts: it is checked
    base.chmod(0o755)
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    go, stop = tmp_path / "go", reach / "stop"   # (the keeper, the co-user's, reads `stop`)
    runner = subprocess.Popen([sys.executable, "-c", RUNNER.format(repo=str(REPO)),
                               str(base / "results"), str(go)], stdout=subprocess.PIPE,
                              text=True, cwd=tmp_path)
    keeper = None
    try:
        first = _line(runner, 180)
        assert first and first["first"] == "ok", first
        # Then the folder above the results becomes one others may write (shared with a group,
        # say): the co-user moves the results aside and puts their own trial folder in place.
        base.chmod(0o777)
        trial = Path(first["trial"])
        other_user.run("mv", str(base / "results"), str(base / "results.moved"))
        _plant(other_user, trial, attack, first["pids"], victim)
        if attack in ("forged", "fifo"):
            keeper = subprocess.Popen([SYSTEM_PYTHON, "-c", KEEPER, str(trial), attack,
                                       str(stop)], user=other_user.uid, group=other_user.gid,
                                      extra_groups=[])
            time.sleep(0.5)
        go.touch()
        window = _line(runner, 90)
        # was: the rank rewrote the link's target; the forged 1e9 samples/s was the window's
        # measure; the runner hung in open() on the FIFO; the planted stop ended the session
        assert window is not None, "the runner did not finish the window (it hangs)"
        assert victim.read_text() == "mine\n"
        assert window["window"] == "ok", window
        assert 0 < window["throughput"] < 1e6, window
        assert runner.wait(timeout=60) == 0
        # nothing of the user's went into the co-user's folder; their plants stayed theirs
        assert {p.stat(follow_symlinks=False).st_uid for p in trial.iterdir()} <= {other_user.uid}
        moved = base / "results.moved" / "trials" / trial.name
        assert (moved / "rank0.window1.json").exists()
        assert {p.stat().st_uid for p in moved.iterdir()} == {os.geteuid()}
    finally:
        stop.touch()
        if keeper is not None:
            keeper.wait(timeout=10)
        if runner.poll() is None:
            runner.send_signal(signal.SIGKILL)   # its ranks end with it (PDEATHSIG)
            runner.wait()
        subprocess.run(["rm", "-rf", str(reach)], check=False)


def _refused(argv: list[str], cwd: Path) -> str:
    done = subprocess.run([AUTOTUNE, *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=300)
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("autotune: error:")]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, \
        (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return lines[0]


@pytest.mark.slow
def test_a_results_folder_others_can_rename_is_refused_before_any_trial(tmp_path, other_user):
    # a folder others may write (what its owner shares on purpose): the results under it
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    line = _refused(["run", "--seconds", "1", "--results", str(shared / "results")], tmp_path)
    assert f"--results {shared / 'results'}: someone else could move its trial folders aside" \
        in line and f"chmod go-w {shared}" in line and "~/autotune-results" in line
    # a results folder of another user's: they may rename what is in it
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, other_user.uid, other_user.gid)
    line = _refused(["run", "--seconds", "1", "--results", str(theirs)], tmp_path)
    assert f"the folder {theirs} above it belongs to uid {other_user.uid}" in line
    # the default autotune-results in a group-writable current folder, the group the co-user's
    project = tmp_path / "project"
    project.mkdir()
    os.chown(project, -1, other_user.gid)
    project.chmod(0o775)
    line = _refused(["search", "--budget", "1m"], project)
    assert "--results autotune-results: someone else could move" in line
    assert f"chmod go-w {project}" in line
    # nothing written: no results folder, no study, no trial
    assert sorted(os.listdir(shared)) == sorted(os.listdir(project)) == []
    assert os.listdir(theirs) == []
