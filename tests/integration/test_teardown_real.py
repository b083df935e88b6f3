"""No hang after training, with real processes: once a rank has exited cleanly, a rank sitting
idle past --idle-timeout is ended (named, with where it sat) and counts as finished, in `launch`
and in script trials; a rank still computing is left alone; an abort in teardown after the last
metric line counts, with a note, and an abort before it stays a crash."""
from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import psutil

from autotune.cli import main
from autotune.config import Config
from autotune.result import Outcome
from autotune.run.evaluate import live_evaluator
from autotune.run.trial import TrialSettings
from autotune.script.spec import ScriptSpec
from results_study import live_topology, study_copy

IDLE_S = 3
GRACE_S = 5        # the plan's default grace: SIGTERM, then SIGKILL


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def _launch(tmp_path: Path, capsys, job: str, *extra: str):
    storage = ["--storage", f"sqlite:///{study_copy(tmp_path / 'r')}"]
    start = time.monotonic()
    rc = main(["launch", *storage, "--nproc-per-node", "2", "--check-seconds", "0",
               "--idle-timeout", str(IDLE_S), "--log-dir", str(tmp_path / "logs"), *extra,
               "--", sys.executable, job])
    out, err = capsys.readouterr()
    return rc, out, err, time.monotonic() - start


# Rank 1 blocks the way a rank waiting on a departed peer does: no CPU, no output.
HANGS_IN_TEARDOWN = """
    import os, threading
    print("pid", os.getpid(), "step 10 loss 1.0", flush=True)
    if os.environ["RANK"] == "1":
        threading.Event().wait()
"""


def _pids(out: str) -> list[int]:
    return [int(line.split("pid ")[1].split()[0]) for line in out.splitlines() if "pid " in line]


def test_launch_ends_a_rank_stuck_after_the_other_exited(tmp_path, capsys):
    rc, out, err, took = _launch(tmp_path, capsys, _script(tmp_path, HANGS_IN_TEARDOWN))
    assert rc == 0, err
    assert f"warning: rank 1 idle for {IDLE_S} s after rank 0 exited; ended" in err, err
    assert "it counts as finished" in err
    assert took < IDLE_S + GRACE_S + 15, took      # start-up, one check interval, slack
    pids = _pids(out)
    assert len(pids) == 2
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_launch_leaves_a_rank_that_is_still_computing(tmp_path, capsys):
    job = _script(tmp_path, f"""
        import os, time
        if os.environ["RANK"] == "1":      # a checkpoint written long after rank 0 left
            end = time.time() + {IDLE_S + 4}
            while time.time() < end:
                sum(range(10000))
        print("finished", flush=True)
    """)
    rc, out, err, took = _launch(tmp_path, capsys, job)
    assert rc == 0, err
    assert "[rank1]: finished" in out
    assert "idle for" not in err, err
    assert took >= IDLE_S + 4


def _trial(tmp_path: Path, body: str):
    script = ScriptSpec.scanned((sys.executable, _script(tmp_path, body)),
                                metric=r"throughput: ([0-9.]+)")
    settings = TrialSettings(script=script, results_dir=str(tmp_path / "res"),
                             timeout_s=60, grace_s=GRACE_S, idle_s=IDLE_S)
    evaluate = live_evaluator(live_topology(), settings, adapt_timeout=False)
    start = time.monotonic()
    return evaluate(Config(nproc=2), "throughput"), time.monotonic() - start


def test_script_trial_with_a_rank_stuck_in_teardown_counts_with_a_note(tmp_path):
    res, took = _trial(tmp_path, """
        import os, threading
        print("throughput: 120.5", flush=True)
        if os.environ["RANK"] == "1":
            threading.Event().wait()
    """)
    assert res.outcome == Outcome.OK, res.reason
    assert res.throughput == 120.5
    assert f"rank 1 idle for {IDLE_S} s after rank 0 exited; ended" in res.note
    assert took < IDLE_S + GRACE_S + 15, took   # not the 60 s timeout


def test_abort_after_the_last_metric_line_counts_before_it_is_a_crash(tmp_path):
    res, _ = _trial(tmp_path, """
        import os, sys
        print("throughput: 80", flush=True)
        if os.environ["RANK"] == "0":
            sys.stderr.write("terminate called without an active exception\\n")
            sys.stderr.flush()
            os.abort()
    """)
    assert res.outcome == Outcome.OK, res.reason
    assert res.throughput == 80
    assert "killed by SIGABRT after rank 0's last metric line (in teardown)" in res.note
    res, _ = _trial(tmp_path, """
        import os
        if os.environ["RANK"] == "0":
            os.abort()
        print("throughput: 80", flush=True)
    """)
    assert res.outcome == Outcome.CRASH
    assert "rank 0 killed by SIGABRT" in res.reason
