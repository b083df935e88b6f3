"""Issue 34, item 2: a search starting beside another must not take the other's live ranks for
orphans. The runner here is a real process named `autotune`, as the installed command's is (a
script's process takes the script's name): the old test judged a rank orphaned when its parent's
name lacked "python", so these ranks were killed mid-trial and stored as a false `oom`.

The search-level target (two `autotune search --allow-concurrent` in one folder, 0 false failures
over 10 repetitions) is benchmarks/timed/concurrent_searches.py, too long for the suite.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from paths import REPO, TESTS
from test_runner import CHILD, child_trial, survivors

from autotune.util.process_identity import RUNNER_ENV
from autotune.run.runner import reap_orphans


def start_named_runner(tmp: Path, name: str = "autotune") -> subprocess.Popen[str]:
    """A runner mid-trial (rank 1 hung, rank 0 in all_reduce) in a process named `name`: an
    executable script of that name, run through its #! line, like the installed entry point."""
    tmp.mkdir(mode=0o700, exist_ok=True)   # the trial's folder: 0700 (util/checked_folder.py)
    script = tmp / name
    script.write_text(f"#!{sys.executable}\n" + CHILD.format(
        repo=str(REPO), tests=str(TESTS), here=str(TESTS / "integration"), tmp=str(tmp),
        fault="hang_collective"))
    script.chmod(0o755)
    runner = subprocess.Popen([str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    deadline = time.monotonic() + 30
    log1 = tmp / "rank1.log"
    while not (log1.exists() and "hanging" in log1.read_text(errors="replace")):
        assert time.monotonic() < deadline and runner.poll() is None, runner.communicate()
        time.sleep(0.1)
    return runner


def test_a_starting_search_leaves_the_live_ranks_of_a_runner_named_autotune(tmp_path):
    runner = start_named_runner(tmp_path / "live")
    try:
        assert psutil.Process(runner.pid).name() == "autotune"
        ranks = eval((tmp_path / "live" / "pids").read_text())
        assert reap_orphans(str(tmp_path)) == []      # was: both ranks, killed by SIGKILL
        time.sleep(0.5)                                # a SIGKILL would have landed by now
        assert all(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                   for p in ranks)
        assert all(psutil.Process(p).environ()[RUNNER_ENV].split()[1] == str(runner.pid)
                   for p in ranks)
    finally:
        runner.send_signal(signal.SIGINT)
        out, _ = runner.communicate(timeout=15)
    assert "interrupted: KeyboardInterrupt" in out, out   # the trial was still running
    assert survivors(child_trial(tmp_path / "live")) == []


def test_the_ranks_of_a_killed_runner_named_autotune_are_still_reaped(tmp_path):
    """The other half: once that exact runner is gone (kill -9), its rank that outlived it (it
    ignores the SIGTERM a dying runner sends) is an orphan, whatever the runner was named."""
    tmp = tmp_path / "dead"
    tmp.mkdir(mode=0o700)
    script = tmp / "autotune"
    script.write_text(f"#!{sys.executable}\n" + CHILD.format(
        repo=str(REPO), tests=str(TESTS), here=str(TESTS / "integration"), tmp=str(tmp),
        fault="ignore_sigterm+hang_collective"))
    script.chmod(0o755)
    runner = subprocess.Popen([str(script)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not (tmp / "pids").exists() or not (tmp / "rank1.log").exists() or \
                "hanging" not in (tmp / "rank1.log").read_text(errors="replace"):
            assert time.monotonic() < deadline and runner.poll() is None
            time.sleep(0.1)
        runner.kill()
        runner.wait()
        rank0, rank1 = eval((tmp / "pids").read_text())
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(rank0).wait(timeout=10)
        assert reap_orphans(str(tmp_path)) == [rank1]
    finally:
        reap_orphans(str(tmp_path))
    time.sleep(0.5)
    assert survivors(child_trial(tmp)) == []
    assert os.path.exists(tmp / "pids")


ROUNDS, OPENERS = 6, 4
# Each opener imports once, then for every round says it is ready and waits for that round's go:
# the race is between the opens alone, as between searches that started together; a failed open
# goes to stderr and into the opener's exit code.
OPEN_AT_ONCE = """
import os, sys, time, traceback
sys.path.insert(0, {repo!r})
from autotune.study.storage import open_storage
failed = 0
for round_ in range({rounds}):
    open(os.path.join({tmp!r}, f"ready{{round_}}-{{sys.argv[1]}}"), "w").close()
    go = os.path.join({tmp!r}, f"go{{round_}}")
    while not os.path.exists(go):
        time.sleep(0.001)
    try:
        open_storage(f"sqlite:///{{{tmp!r}}}/r{{round_}}.db")
    except Exception as exc:
        failed += 1
        print(f"round {{round_}}: " + traceback.format_exception_only(exc)[-1].strip(), file=sys.stderr)
sys.exit(1 if failed else 0)
"""


def test_searches_started_together_on_a_new_sqlite_file_all_open_it(tmp_path):
    """Two `autotune search --allow-concurrent` started together in a fresh folder both create
    Optuna's tables in the new file: the loser failed (alembic_version's unique row, or a table
    created meanwhile) and the search ended with exit 2 before any trial. Four openers, six
    fresh files, each opened by all four at once."""
    code = OPEN_AT_ONCE.format(repo=str(REPO), tmp=str(tmp_path), rounds=ROUNDS)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i)], stderr=subprocess.PIPE,
                              text=True) for i in range(OPENERS)]
    try:
        for round_ in range(ROUNDS):
            ready = [tmp_path / f"ready{round_}-{i}" for i in range(OPENERS)]
            deadline = time.monotonic() + 120
            while not all(r.exists() for r in ready):   # every one waiting for the go
                assert time.monotonic() < deadline and all(p.poll() is None for p in procs), \
                    [p.communicate()[1][-2000:] for p in procs if p.poll() is not None]
                time.sleep(0.01)
            time.sleep(0.05)                             # and in its wait loop
            (tmp_path / f"go{round_}").touch()
        failed = [line for p in procs for line in p.communicate(timeout=120)[1].splitlines()
                  if p.returncode]
    finally:
        for p in procs:
            p.kill()
    assert failed == [] and all(p.returncode == 0 for p in procs)
    assert all((tmp_path / f"r{round_}.db").exists() for round_ in range(ROUNDS))
