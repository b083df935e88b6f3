"""Issue 34, on a machine shared with other users and containers: oneCCL's shared memory of ranks
in another pid namespace is never removed; what the runner's own ranks left is, even after a
kill -9 of the runner (items 5, 6 and 8; real processes, real /dev/shm, a real second uid)."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from paths import REPO, TESTS
from autotune.plan.cluster import MARKER
from autotune.plan.launch_plan import LaunchPlan, RankExpect, RankPlan, WorkerRequest
from autotune.run.runner import run_plan

SHM = Path("/dev/shm")
RANK = str(TESTS / "shm_rank.py")


def _free_pid() -> int:
    """A pid no process has here (another pid namespace may well use it)."""
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    for pid in range(pid_max - 2000, 1000, -97):
        if not psutil.pid_exists(pid) and not (SHM / f"{pid}:0:0").exists():
            return pid
    raise AssertionError("no free pid")


@contextlib.contextmanager
def container_segment():
    """A live process in its own pid namespace (a container run with --ipc=host) mapping its
    oneCCL-style segment /dev/shm/<its pid there>:0:0, a pid that does not exist here."""
    pid = _free_pid()
    script = (f"echo {pid - 1} > /proc/sys/kernel/ns_last_pid; "
              f"{sys.executable} {RANK}")
    proc = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("mapped"), line
        path = Path(line.split()[1])
        assert not psutil.pid_exists(int(path.name.split(":")[0]))   # judged "dead" from here
        yield path
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        (SHM / f"{pid}:0:0").unlink(missing_ok=True)


def ccl_plan(tmp: Path, *, timeout_s: float = 4.0, ignore_sigterm: bool = False) -> LaunchPlan:
    """One ccl 'rank' (tests/shm_rank.py) that maps its segment and hangs until timed out."""
    argv = (sys.executable, RANK, *(["--ignore-sigterm"] if ignore_sigterm else []))
    return one_rank_plan(tmp, argv, backend="ccl", timeout_s=timeout_s)


def one_rank_plan(tmp: Path, argv: tuple[str, ...], *, backend: str = "gloo",
                  timeout_s: float = 4.0) -> LaunchPlan:
    workdir = tmp / "results" / "trials" / "t1"
    request = WorkerRequest(workload="fake", config={"backend": backend, "nproc": 1},
                            ranks=(RankExpect(cpus=None, threads=None, allocator="default",
                                              omp_runtime="libgomp", precision="fp32"),))
    rank = RankPlan(rank=0, argv=argv, env={**os.environ, "AUTOTUNE_RESULT": str(workdir / "r0")},
                    cpus=None, mem_node=None, log_path=str(workdir / "rank0.log"),
                    result_path=str(workdir / "rank0.json"))
    return LaunchPlan(ranks=(rank,), request_path=str(workdir / "request.json"), request=request,
                      timeout_s=timeout_s, grace_s=1.0, workdir=str(workdir))


def _rank_segment(plan: LaunchPlan) -> Path:
    log = Path(plan.ranks[0].log_path).read_text()
    return Path(log.split()[1])


@pytest.mark.slow
def test_remote_kill_ccl_keeps_a_live_segment_of_another_pid_namespace():
    """`remote kill MARKER --ccl` ran on every host of a ccl trial and deleted the segments of
    every pid it could not see: a container's live ranks lost theirs."""
    with container_segment() as theirs:
        done = subprocess.run([sys.executable, "-m", "autotune.run.remote", "kill",
                               "no-such-trial", "--ccl"], cwd=REPO, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert theirs.exists()


@pytest.mark.slow
def test_remote_kill_ccl_removes_the_segments_of_the_trial_it_kills(tmp_path):
    marker = f"trial-{os.getpid()}"
    rank = subprocess.Popen([sys.executable, RANK], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, MARKER: marker})
    try:
        mine = Path(rank.stdout.readline().split()[1])
        done = subprocess.run([sys.executable, "-m", "autotune.run.remote", "kill", marker,
                               "--ccl"], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.strip() == "1", done.stderr
        rank.wait(timeout=10)
        assert not mine.exists()
    finally:
        rank.kill()
        rank.wait()


@pytest.mark.slow
def test_a_ccl_trial_removes_its_ranks_segments_and_no_one_elses(tmp_path):
    with container_segment() as theirs:
        plan = ccl_plan(tmp_path)
        res = run_plan(plan)
        assert res.outcome == "timeout", res.reason
        mine = _rank_segment(plan)
        assert not mine.exists()
        assert theirs.exists()
        assert not (Path(plan.workdir) / "ccl-segments.json").exists()   # settled: nothing left to remove


RUNNER = textwrap.dedent("""
    import sys, pathlib
    sys.path[:0] = [{repo!r}, {tests!r}, {here!r}]
    from test_shared_machine import ccl_plan
    from autotune.run.runner import run_plan
    run_plan(ccl_plan(pathlib.Path({tmp!r}), timeout_s=120, ignore_sigterm=True),
             on_start=lambda pids: print(pids[0], flush=True))
""")


@pytest.mark.slow
def test_segments_left_by_a_runner_killed_with_kill_9_are_removed_at_the_next_start(tmp_path):
    """The record written before launch names what the rank mapped; the runner's death leaves
    it, and the next search's start (clean_recorded over trials/) removes just that."""
    from autotune.comm.ccl.shm import RECORD, clean_recorded
    code = RUNNER.format(repo=str(REPO), tests=str(TESTS), here=str(TESTS / "integration"),
                         tmp=str(tmp_path))
    with container_segment() as theirs:
        runner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        rank = psutil.Process(int(runner.stdout.readline()))
        record = tmp_path / "results" / "trials" / "t1" / RECORD
        deadline = time.monotonic() + 60
        while not json.loads(record.read_text())["segments"]:
            assert time.monotonic() < deadline and runner.poll() is None
            time.sleep(0.1)
        runner.kill()                         # kill -9 of the search
        runner.wait()
        mine = SHM / json.loads(record.read_text())["segments"][0]["name"]
        rank.kill()                           # it ignored the SIGTERM of its parent's death
        rank.wait(timeout=10)
        assert mine.exists()                  # no one removed it...
        assert clean_recorded(tmp_path / "results" / "trials") == [mine.name]
        assert not mine.exists() and theirs.exists()


# ---------------------------------------------------------------- item 6: bounded work on input

@pytest.mark.slow
def test_a_backtracking_metric_fails_the_trial_instead_of_hanging_the_search(tmp_path):
    """`--metric '(a+)+$'` over a line of a's backtracks for ever: the trial (of a search, or of
    `verify` with the study's stored pattern) used to hang past every budget."""
    from autotune.config import Config
    from autotune.probe import probe
    from autotune.run.trial import TrialSettings, run_trial
    from autotune.script.spec import ScriptSpec
    script = tmp_path / "job.py"
    script.write_text('print("a" * 60 + "!", flush=True)\nprint("throughput: 5", flush=True)\n')
    settings = TrialSettings(script=ScriptSpec.scanned((sys.executable, str(script)),
                                                       metric="(a+)+$"),
                             results_dir=str(tmp_path / "res"), timeout_s=60)
    res = run_trial(Config(nproc=1), probe(), settings)
    assert res.outcome == "workload_error"
    assert res.reason == ("--metric '(a+)+$': matching rank 0's output took over 10 s (a pattern "
                          "that backtracks, such as (a+)+$; simplify it)")


@pytest.mark.slow
def test_a_rank_log_stops_growing_at_its_cap_and_says_so(tmp_path):
    """A rank printing junk wrote its log without bound under the results folder."""
    MAX_LOG_BYTES, KEEP_TAIL = 64 << 20, 1 << 20     # run/tee.py's
    junk = ("import sys\nline = b'junk ' * 200 + b'\\n'\n"
            f"for _ in range({(MAX_LOG_BYTES + (8 << 20)) // 1001}):\n"
            "    sys.stdout.buffer.write(line)\n"
            "print('the last words', flush=True)\nsys.exit(3)\n")
    plan = one_rank_plan(tmp_path, (sys.executable, "-c", junk), timeout_s=120)
    res = run_plan(plan)
    log = Path(plan.ranks[0].log_path)
    assert res.outcome == "crash" and "the last words" in res.log_tail
    assert log.stat().st_size <= MAX_LOG_BYTES + KEEP_TAIL + 4096
    text = log.read_bytes()
    assert b"[autotune: this log is cut at 64 MiB" in text
    assert b"bytes of output dropped here]" in text and text.endswith(b"the last words\n")


@pytest.mark.slow
def test_the_launch_tee_reads_output_without_newlines_in_bounded_memory(tmp_path):
    """`launch` read its ranks' pipes by line: 64 MiB with no newline was 64 MiB in memory."""
    import io
    import tracemalloc
    from autotune.run.tee import Tee
    writer = subprocess.Popen([sys.executable, "-c", "import sys\nfor _ in range(1024): "
                               "sys.stdout.buffer.write(b'x' * 65536)\nprint('done')"],
                              stdout=subprocess.PIPE)
    echo = io.StringIO()
    tracemalloc.start()
    try:
        Tee(None)._pump(writer.stdout, str(tmp_path / "rank0.log"), "[rank0]: ")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        writer.wait()
    assert peak < 8 << 20, peak
    assert (tmp_path / "rank0.log").stat().st_size == (64 << 20) + len("done\n")
    tee = Tee(echo)                      # the terminal gets the long line in pieces, then "done"
    writer = subprocess.Popen([sys.executable, "-c", "print('a' * 200000 + '\\nlast', end='')"],
                              stdout=subprocess.PIPE)
    tee._pump(writer.stdout, str(tmp_path / "rank1.log"), "[rank1]: ")
    writer.wait()
    lines = echo.getvalue().splitlines()
    assert lines[-1] == "[rank1]: last" and all(len(x) <= 65536 + 9 for x in lines)
    assert "".join(x[9:] for x in lines[:-1]) == "a" * 200000


@pytest.mark.slow
def test_pruning_trials_keeps_the_folder_of_a_trial_still_running(tmp_path):
    """A concurrent search's running trial may be older than the newest N (a long trial)."""
    from autotune.run.trials_dir import prune
    trials = tmp_path / "trials"
    for i, name in enumerate(("running", "done", "newest")):
        (trials / name).mkdir(parents=True)
        os.utime(trials / name, (1000 + i, 1000 + i))
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            env={**os.environ, "AUTOTUNE_RESULT": str(trials / "running" / "r0")})
    try:
        assert prune(str(trials), 1) == ["done"]
        assert sorted(os.listdir(trials)) == ["newest", "running"]
    finally:
        rank.kill()
        rank.wait()


# ---------------------------------------------------------------- item 8: permissions

@pytest.fixture
def other_uid():
    """A real second user of this machine (removed afterwards)."""
    import pwd
    name = f"at34c{os.getpid() % 100000}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=True, capture_output=True)
    try:
        yield pwd.getpwnam(name).pw_uid
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def _ccl_run(tmp: Path, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autotune", "run", "--set", "backend=ccl",
                           "--set", "nproc=2", "--dry-run", "--results", str(tmp / "results")],
                          cwd=REPO, env={**os.environ, "AUTOTUNE_CACHE": str(cache)},
                          capture_output=True, text=True, timeout=300)


def _planted_cache(tmp: Path, name: str) -> tuple[Path, Path]:
    """A copy of this machine's real ccl build in a cache folder of its own: (cache, module)."""
    import shutil
    from autotune.comm.ccl.build import cached_extension
    real = cached_extension()
    assert real is not None, "the ccl backend is not built (./setup.sh)"
    cache = tmp / name
    folder = cache / "ccl" / real.parent.name
    folder.mkdir(parents=True)
    for p in (cache, cache / "ccl", folder):
        p.chmod(0o755)
    shutil.copy2(real, folder / real.name)
    return cache, folder / real.name


@pytest.mark.slow
def test_a_cached_ccl_build_someone_else_can_change_is_refused(tmp_path, other_uid):
    """A shared or planted cache is code execution in every ccl rank: the build is loaded only
    when it and every folder above it belong to this user (or root) and no one else can write."""
    tmp_path.chmod(0o755)
    cache, module = _planted_cache(tmp_path, "mine")
    ok = _ccl_run(tmp_path, cache)
    assert ok.returncode == 0, ok.stderr              # the same copy, ours: used
    cases = {"theirs": lambda m: os.chown(m, other_uid, -1),
             "group-writable": lambda m: m.chmod(0o775),
             "their-folder": lambda m: os.chown(m.parent, other_uid, -1),
             "open-folder": lambda m: m.parent.parent.chmod(0o777)}
    for name, plant in cases.items():
        cache, module = _planted_cache(tmp_path, name)
        plant(module)
        done = _ccl_run(tmp_path, cache)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, (name, done.stderr)
        assert "refusing the cached build" in lines[0] and "fix: rm -r" in lines[0], name
        assert not (tmp_path / "results" / "trials").exists()


@pytest.mark.slow
def test_a_real_trial_leaves_nothing_others_can_read_even_with_umask_0(tmp_path):
    """`autotune run` with a permissive umask: folders 0700, files 0600 (request, rank logs,
    results), where they were 0755/0644 and held the script's arguments and log tails."""
    import stat as st
    done = subprocess.run(["sh", "-c", 'umask 000 && exec "$@"', "sh", sys.executable, "-m",
                           "autotune", "run", "--seconds", "1", "--set", "nproc=2",
                           "--results", str(tmp_path / "results")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = {}
    for folder, dirs, files in os.walk(tmp_path / "results"):
        for name in [*dirs, *files, ""]:
            path = os.path.join(folder, name)
            found[os.path.relpath(path, tmp_path)] = st.S_IMODE(os.lstat(path).st_mode)
    assert any(p.endswith("rank1.log") for p in found) and any(p.endswith("rank0.json") for p in found)
    assert {p: m & 0o077 for p, m in found.items()} == {p: 0 for p in found}, found


@pytest.mark.slow
def test_another_users_open_results_folder_keeps_its_mode_and_is_named(tmp_path, other_uid):
    from autotune.util.private_files import foreign_folder, private_dir
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    os.chown(shared, other_uid, -1)
    assert private_dir(shared / "trials" / "t1") == [str(shared / "trials"),
                                                     str(shared / "trials" / "t1")]
    assert (shared.stat().st_mode & 0o777, shared.stat().st_uid) == (0o777, other_uid)
    assert (shared / "trials").stat().st_mode & 0o777 == 0o700
    why = foreign_folder(shared)
    assert why is not None and f"belongs to uid {other_uid}" in why
    assert "does not change the permissions" in why
    assert foreign_folder(shared / "trials") is None


@pytest.mark.slow
def test_a_search_into_another_users_open_folder_says_so_and_leaves_its_mode(tmp_path, other_uid,
                                                                              monkeypatch):
    """The whole search (replayed landscape): it does not chmod a --results it does not own,
    warns in one line, and what it creates inside (database, trials/) is private."""
    import tempfile
    from autotune.progress import Silent
    from autotune.tune import SearchRequest, search
    from benchmarks.landscapes.synthetic import synthetic
    from benchmarks.landscapes.table import SimClock

    class Warnings(Silent):
        said: list[str] = []

        def warn(self, text: str) -> None:
            self.said.append(text)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    os.chown(shared, other_uid, -1)
    land, clock, progress = synthetic("formula", seed=0), SimClock(), Warnings()
    search(SearchRequest(budget_s=300.0, results=str(shared), seed=0, max_trials=2),
           label="cnn", topology=land.topology(), evaluate=land.evaluator(clock), clock=clock,
           progress=progress)
    assert (shared.stat().st_mode & 0o777, shared.stat().st_uid) == (0o777, other_uid)
    assert [w for w in progress.said if "does not change the permissions" in w] == [
        f"--results {shared} belongs to uid {other_uid} and is open to others (drwxrwxrwx): "
        "autotune does not change the permissions of a folder it does not own; what it writes "
        "inside is 0700/0600, but names are visible"]
    assert (shared / "autotune.db").stat().st_mode & 0o077 == 0
