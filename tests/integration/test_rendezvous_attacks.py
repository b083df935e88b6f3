"""Issue 61, hole 1: anyone joined a trial as a rank, and its pickle ran in the user's rank 0.

A real 2-rank trial whose rank 1 starts late (a sitecustomize sleeps in it, as a rank on a slower
host does), and a stranger who joins in its place:
- across hosts the ranks meet at rank 0's TCP store, so the stranger (torch, no launch token)
  joins as rank 1 and sends a pickle whose loading creates a file. Before: rank 0 unpickled it
  (the file appeared). Now: the ranks exchange bytes, never pickles, and prove first that they
  hold the launch's secret: the trial is refused in one line, nothing measured, no file.
- on one machine a real second uid looks for the rendezvous during the late start. Before: the
  store listened on MASTER_PORT (every interface) and the co-user connected. Now: the ranks meet
  in a file of the 0700 trial folder and nothing listens there; the trial is measured.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from other_user import other_user  # noqa: F401  (the fixture)
from paths import REPO

DELAY_S = 6.0
SYSTEM_PYTHON = "/usr/bin/python3"     # the co-user's: they cannot reach the checkout's venv

LATE_RANK = f"""
import os, sys, time
if os.environ.get("RANK") == "1" and "--request" in sys.argv:
    time.sleep({DELAY_S})
"""

# The runner in a process of its own: a 2-rank trial, its port said first. "tcp": the ranks meet
# as they do across hosts (the plan of one machine without its file rendezvous).
RUNNER = """
import json, sys
from dataclasses import replace
sys.path.insert(0, {repo!r})
from autotune.config import Config
from autotune.probe import probe
from autotune.run.runner import run_plan
from autotune.run.trial import TrialSettings, plan_trial
results, how = sys.argv[1], sys.argv[2]
settings = TrialSettings(target_seconds=0.5, timeout_s=90.0, results_dir=results)
plan = plan_trial(Config(nproc=2, threads=1), probe(None), settings)
if how == "tcp":
    plan = replace(plan, ranks=tuple(replace(r, env={{k: v for k, v in r.env.items()
                                                     if k != "AUTOTUNE_RENDEZVOUS"}})
                                     for r in plan.ranks))
print(json.dumps({{"port": plan.master_port}}), flush=True)
run = run_plan(plan)
print(json.dumps({{"outcome": run.outcome, "reason": run.reason,
                  "throughput": [r.get("throughput") for r in run.rank_results
                                 if isinstance(r, dict)]}}), flush=True)
"""

# The stranger: what a rank of the old protocol did first (all_gather_object), with an object
# whose unpickling creates `marker`.
IMPOSTOR = """
import datetime, socket, sys, time
import torch.distributed as dist
port, marker = int(sys.argv[1]), sys.argv[2]
class Planted:
    def __reduce__(self):
        return (open, (marker, "w"))
while True:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        break
    except OSError:
        time.sleep(0.05)
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=1, world_size=2,
                        timeout=datetime.timedelta(seconds=20))
print("joined", flush=True)
out = [None, None]
dist.all_gather_object(out, Planted())
print("sent", flush=True)
"""


def _late_site(tmp_path: Path) -> str:
    site = tmp_path / "late-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(LATE_RANK)
    return str(site)


def _start_runner(tmp_path: Path, how: str) -> tuple[subprocess.Popen, int]:
    env = {**os.environ, "PYTHONPATH": f"{REPO}:{_late_site(tmp_path)}"}
    runner = subprocess.Popen([sys.executable, "-c", RUNNER.format(repo=str(REPO)),
                               str(tmp_path / "results"), how], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert runner.stdout is not None
    return runner, json.loads(runner.stdout.readline())["port"]


def _finish(runner: subprocess.Popen) -> dict:
    out, err = runner.communicate(timeout=150)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert lines, err[-3000:]
    return json.loads(lines[-1])


def _impostor(port: int, marker: Path, *, leaves: bool = False) -> subprocess.Popen:
    code = IMPOSTOR if not leaves else IMPOSTOR.split("out = [None, None]")[0] + "os._exit(0)\n"
    return subprocess.Popen([sys.executable, "-c", "import os\n" + code, str(port), str(marker)],
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_a_stranger_who_joins_as_the_late_rank_runs_nothing_and_is_refused(tmp_path):
    marker = tmp_path / "the-strangers-pickle-ran"
    runner, port = _start_runner(tmp_path, "tcp")
    impostor = _impostor(port, marker)
    try:
        got = _finish(runner)
    finally:
        impostor.kill()
        said = impostor.communicate()[0]
    assert "joined" in said, said[-2000:]          # the stranger did get in as rank 1
    assert not marker.exists(), "the stranger's pickle ran in the user's rank"
    assert got["outcome"] != "ok" and not any(got["throughput"]), got
    reason = got["reason"]
    assert "\n" not in reason and "launch's secret" in reason and "rank 1" in reason, reason


def test_a_stranger_who_breaks_the_exchange_is_named_too(tmp_path):
    """A stranger that joins and then leaves: the exchange itself fails (the peer reset it), and
    the refusal still names the rank that proved nothing, in one line."""
    runner, port = _start_runner(tmp_path, "tcp")
    impostor = _impostor(port, tmp_path / "unused", leaves=True)
    try:
        got = _finish(runner)
    finally:
        impostor.kill()
        said = impostor.communicate()[0]
    assert "joined" in said, said[-2000:]
    assert got["outcome"] != "ok" and not any(got["throughput"]), got
    reason = got["reason"]
    assert "\n" not in reason and "rank 1 proved nothing" in reason, reason


def test_on_one_machine_nothing_listens_for_the_rendezvous(tmp_path, other_user):  # noqa: F811
    runner, port = _start_runner(tmp_path, "file")
    time.sleep(DELAY_S / 2)      # rank 0 waits for the late rank 1 now
    probe = ("import socket, sys\n"
             "try:\n socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=2)\n"
             " print('connected')\nexcept OSError as e:\n print('refused', e)\n")
    said = other_user.run(SYSTEM_PYTHON, "-c", probe, str(port)).stdout
    listening = _listening_ports()
    got = _finish(runner)
    assert said.startswith("refused"), said
    assert port not in listening
    assert got["outcome"] == "ok" and all(got["throughput"]), got


def _listening_ports() -> set[int]:
    """Every TCP port something listens on here (/proc/net/tcp and tcp6: state 0A)."""
    ports = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(name, encoding="ascii") as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A":
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_across_hosts_rank_0s_store_listens_on_its_address_only():
    from autotune.worker.rendezvous import _listen
    sock = _listen("127.0.0.1", 0)
    try:
        assert sock.getsockname()[0] == "127.0.0.1"
        outside = socket.gethostbyname(socket.gethostname())
        if outside.startswith("127."):
            return
        try:
            socket.create_connection((outside, sock.getsockname()[1]), timeout=1).close()
            reached = True
        except OSError:
            reached = False
        assert not reached
    finally:
        sock.close()
