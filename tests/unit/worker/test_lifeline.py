"""Issue 54: a rank across hosts ends when the runner's end of its launch closes (its stdin,
held by the runner through the launcher: worker/lifeline.py). Real pipes and processes."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from autotune.plan.launch_plan import EXIT_LIFELINE
from autotune.util.channel import LIFELINE_ENV
from autotune.worker.lifeline import hold, is_lifeline

RANK = ("import time; from autotune.worker import lifeline; "
        "print(lifeline.hold(3), flush=True); time.sleep(60)")


def test_only_a_pipe_or_a_socket_can_be_a_lifeline(tmp_path):
    r, w = os.pipe()
    try:
        assert is_lifeline(r)
    finally:
        os.close(r)
        os.close(w)
    with open(os.devnull) as null, open(tmp_path / "f", "w") as f:
        assert not is_lifeline(null.fileno()) and not is_lifeline(f.fileno())
    assert not hold(0, {})    # a launch that asks for none


def test_a_rank_ends_when_the_runners_end_closes():
    env = {**os.environ, LIFELINE_ENV: "1"}
    rank = subprocess.Popen([sys.executable, "-c", RANK], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        assert rank.stdout.readline().strip() == "True"
        time.sleep(0.2)
        assert rank.poll() is None       # held open: the rank goes on
        closed = time.monotonic()
        rank.stdin.close()               # the runner, its launcher or the connection is gone
        assert rank.wait(timeout=20) == EXIT_LIFELINE
        assert time.monotonic() - closed < 10
        assert "the runner's end of this launch closed" in rank.stderr.read()
    finally:
        rank.kill()
        rank.wait()


def test_without_the_launchs_word_stdin_is_left_alone():
    env = {k: v for k, v in os.environ.items() if k != LIFELINE_ENV}
    rank = subprocess.Popen([sys.executable, "-c", RANK], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert rank.stdout.readline().strip() == "False"
        rank.stdin.close()
        time.sleep(1.0)
        assert rank.poll() is None
    finally:
        rank.kill()
        rank.wait()
