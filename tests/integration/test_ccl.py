"""The ccl backend (autotune/comm/ccl) with real processes: every collective and dtype against
gloo, DDP parity, a rank killed mid-all-reduce, the build cache, and the worker's own trial."""
from __future__ import annotations

from paths import REPO, TESTS
import contextlib
import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from autotune.comm import ccl
from autotune.run.runner import free_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def ccl_usable():
    why = ccl.problem()
    if why and os.environ.get("CI"):
        pytest.fail(f"setup.sh should have built the ccl backend: {why}")
    if why:
        pytest.skip(f"ccl unavailable here: {why}")


def launch(mode: str, world: int, *, timeout_s: float = 120, env: dict | None = None):
    """Start `world` ranks of tests/ccl_ranks.py; returns [(returncode, json line, stderr)]."""
    port = str(free_port())
    procs = []
    for rank in range(world):
        e = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
             "MASTER_PORT": port, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), **(env or {})}
        procs.append(subprocess.Popen([sys.executable, str(TESTS / "ccl_ranks.py"), mode], env=e,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True))
    out = []
    for p in procs:
        try:
            stdout, stderr = p.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError(f"{mode}: rank still running after {timeout_s}s")
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        out.append((p.returncode, json.loads(lines[-1]) if lines else None, stderr[-2000:]))
    # A rank killed on purpose ("die") leaves its /dev/shm segment, and a later rank of the suite
    # given its pid fails to initialize ATL (seen once: a script trial further on). These ranks
    # are ours and have ended, so what carries their pids is theirs.
    from autotune.comm.ccl.shm import SHM, named_for
    for p in procs:
        for name in named_for(p.pid):
            with contextlib.suppress(OSError):
                os.unlink(SHM / name)
    return out


@pytest.mark.parametrize("world", [2, 4])
def test_every_collective_and_dtype_matches_gloo(world):
    for rc, said, err in launch("collectives", world, timeout_s=300):
        assert rc == 0 and said is not None, err
        assert said["bad"] == [] and said["backend"] == "ccl"
        assert said["provider"] in ("autotune", "intel")


def test_ddp_trains_to_the_same_parameters_as_gloo():
    for rc, said, err in launch("ddp", 2):
        assert rc == 0 and said is not None, err
        assert said["bad"] == []


def test_a_rank_killed_mid_allreduce_fails_the_others_within_the_timeout():
    started = time.monotonic()
    results = launch("die", 2, timeout_s=90, env={"AUTOTUNE_TEST_TIMEOUT_S": "5"})
    (rc0, said0, err0), (rc1, _, _) = results
    assert rc1 == -9                                      # the one we killed
    assert rc0 == 3 and said0 is not None, err0           # the survivor said why, and exited
    assert "timed out after 5000 ms" in said0["error"] and "peer rank died" in said0["error"]
    assert said0["after_s"] < 60                         # not hung: the timeout, not the test's
    assert time.monotonic() - started < 90
    left = [p for p in psutil.process_iter(["cmdline"])
            if "ccl_ranks.py" in " ".join(p.info["cmdline"] or [])]
    assert left == []


def test_a_second_build_or_import_does_not_compile():
    path = ccl.cached_extension()
    if path is None:
        pytest.skip("Intel's bindings provide ccl here; autotune builds nothing")
    before = path.stat()
    lines = []
    assert ccl.build(log=lines.append) == path
    assert lines == []                                    # "compiling ..." is said before a build
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    # a new process imports the cached module as it is
    done = subprocess.run([sys.executable, "-m", "autotune.comm.ccl", "build"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "compiling" not in done.stdout + done.stderr
    assert str(path) in done.stdout


def test_a_module_compiled_elsewhere_is_adopted_for_this_torch_and_refused_for_another(tmp_path):
    """The GPU machine's kit carries the module compiled here for that machine's torch
    (benchmarks/device/kit.py); `adopt` installs it where a fresh cache has none, by name."""
    built = ccl.cached_extension()
    if built is None:
        pytest.skip("Intel's bindings provide ccl here; autotune builds nothing")
    env = {**os.environ, "AUTOTUNE_CACHE": str(tmp_path / "cache")}

    def ccl_cmd(*args):
        return subprocess.run([sys.executable, "-m", "autotune.comm.ccl", *args], env=env,
                              capture_output=True, text=True, timeout=120)
    assert ccl_cmd("status").stdout.startswith("ccl: unavailable (the ccl extension is not built")
    suffix = built.name[built.name.index("."):]
    other = tmp_path / "elsewhere" / f"autotune_ccl_000000000000{suffix}"
    mine = tmp_path / "kit" / built.name
    for copy in (other, mine):
        copy.parent.mkdir()
        copy.write_bytes(built.read_bytes())
    refused = ccl_cmd("adopt", str(other))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "compiled for another torch, Python or backend source" in refused.stderr
    assert ccl_cmd("status").returncode == 1              # nothing was installed
    adopted = ccl_cmd("adopt", str(mine))
    assert adopted.returncode == 0, adopted.stderr
    assert str(tmp_path / "cache" / "ccl") in adopted.stdout
    assert ccl_cmd("status").stdout.strip() == "ccl: available (autotune)"


def test_status_names_the_provider():
    done = subprocess.run([sys.executable, "-m", "autotune.comm.ccl", "status"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() in ("ccl: available (autotune)",
                                                            "ccl: available (intel)")


def test_a_script_written_for_intels_bindings_runs_unmodified(tmp_path):
    """`import oneccl_bindings_for_pytorch` + init_process_group("ccl"), as Intel's examples
    do, under `autotune launch` and as a script trial of `autotune run`."""
    from autotune.cli import main
    manifest = tmp_path / "ccl.json"
    manifest.write_text(json.dumps({"format": "autotune-launch/1", "config": {
        "nproc": 2, "threads": 1, "binding": "taskset", "backend": "ccl"}, "manifest": {}}))
    logs = tmp_path / "logs"
    cmd = [sys.executable, "-c", "import sys; from autotune.cli import main; sys.exit(main(sys.argv[1:]))",
           "launch", "--config", str(manifest), "--force",
           "--log-dir", str(logs), "--", sys.executable, str(TESTS / "ccl_script.py")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    for rank in (0, 1):
        text = (logs / f"rank{rank}.log").read_text()
        assert f"rank {rank}: backend ccl provider autotune in sync True" in text
    rc = main(["run", "--set", "backend=ccl", "--set", "nproc=2", "--set", "threads=1",
               "--results", str(tmp_path / "results"), "--metric", r"samples/s: ([0-9.]+)",
               "--json", "--", sys.executable, str(TESTS / "ccl_script.py")])
    assert rc == 0


def test_intels_own_package_is_used_where_installed(tmp_path):
    """Intel's oneccl_bind_pt is not on PyPI, so a stand-in package of its name plays it here: it
    registers "ccl" (over gloo) when imported. With it installed, the shim steps aside and
    the script gets Intel's module, not autotune's build."""
    site = tmp_path / "site" / "oneccl_bindings_for_pytorch"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text(
        "import torch.distributed as dist\n"
        "from torch.distributed.distributed_c10d import ProcessGroupGloo\n"
        "IS_INTEL_STAND_IN = True\n"
        "dist.Backend.register_backend('ccl', lambda store, rank, size, timeout: "
        "ProcessGroupGloo(store, rank, size, timeout), devices=['cpu'])\n")
    probe = ("import oneccl_bindings_for_pytorch as m, torch.distributed as d\n"
             "from autotune.comm import ccl\n"
             "print(getattr(m, 'IS_INTEL_STAND_IN', False), ccl.provider(), 'ccl' in d.Backend.backend_list)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ccl.shim_dir()), str(tmp_path / "site"),
                                                        str(REPO)])}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "intel", "True"]
    # and without it, the shim registers autotune's own
    env["PYTHONPATH"] = os.pathsep.join([str(ccl.shim_dir()), str(REPO)])
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.split() == ["False", "autotune", "True"], done.stderr


def test_an_exported_ccl_command_runs_as_pasted(tmp_path):
    """export's shell text for a ccl configuration carries oneCCL's environment and the stand-in
    that registers the backend: pasted into bash, an Intel-style script trains over ccl."""
    from autotune.config import Config
    from autotune.export.command import launch_command, render
    from autotune.probe import probe
    cmd = launch_command(Config(nproc=2, threads=1, binding="taskset", backend="ccl"), probe(),
                         program=(sys.executable, str(TESTS / "ccl_script.py")), script=True,
                         port=free_port())
    text = render(cmd, "shell")
    assert "CCL_WORKER_COUNT=1" in text and f"PYTHONPATH={ccl.shim_dir()}" in text
    done = subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=180,
                          cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr[-2000:]
    for rank in (0, 1):
        assert f"rank {rank}: backend ccl provider autotune in sync True" in done.stdout


def test_the_backend_benchmark_writes_its_table(tmp_path):
    """benchmarks/timed/backends.py end to end at the smallest settings (no figures are judged here)."""
    from benchmarks.timed import backends
    out = tmp_path / "b.json"
    assert backends.main(["--ranks", "2", "--sizes", "4096", "--rounds", "1", "--skip-ddp",
                          "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["machine"]["fingerprint"] and data["machine"]["cpu family"]
    (row,) = data["allreduce"][0]["rows"]
    assert row["bytes"] == 4096 and row["gloo_us"] > 0 and row["ccl_us"] > 0


def _exit_trial(tmp_path, style: str):
    """One 2-rank script trial of benchmarks/workloads/ccl_exit.py, as a search runs it: each
    rank's own taskset core, so the rank and its progress thread share it."""
    from autotune.config import Config
    from autotune.probe import probe
    from autotune.run.runner import run_plan
    from autotune.run.trial import TrialSettings, plan_trial
    from autotune.script.spec import ScriptSpec
    spec = ScriptSpec.scanned((sys.executable, str(REPO / "benchmarks" / "workloads" / "ccl_exit.py"),
                               "--exit", style), metric=r"samples/s: ([0-9.]+)")
    settings = TrialSettings(script=spec, results_dir=str(tmp_path), timeout_s=120)
    plan = plan_trial(Config(nproc=2, threads=1, binding="taskset", backend="ccl"), probe(), settings)
    run = run_plan(plan, idle_s=settings.idle_s)
    return run, [open(rp.log_path, errors="replace").read() for rp in plan.ranks]


def test_a_script_that_returns_with_a_collective_in_flight_exits_cleanly(tmp_path):
    """Issue 35's crash dumps: a script whose last all-reduce is left in flight, its future's
    Python callback to run when it completes, had that callback run on the progress thread
    while Python tore the rank down; Python ended the thread as it took the GIL, in a noexcept
    destructor: SIGABRT at exit (both of 2 trials before the fix, 10 of 10 in the benchmark).
    Now every ccl group is drained at exit, before the teardown: both ranks exit 0, and the
    callback ran on each (rank 1 returned 0.5 s before rank 0 even started the all-reduce)."""
    run, logs = _exit_trial(tmp_path, "async_logged")
    assert run.outcome == "ok" and list(run.exit_codes) == [0, 0] and not run.signalled, \
        (run.reason, [log[-1500:] for log in logs])
    for log in logs:
        assert "terminate called" not in log and "Aborted" not in log
        assert "mean loss 0.500" in log                    # (0 + 1) / 2: the callback ran


def test_the_exit_benchmark_counts_each_ranks_ending(tmp_path):
    """benchmarks/timed/ccl_exit_aborts.py end to end at one trial (its figures are in docs)."""
    from benchmarks.timed import ccl_exit_aborts
    out = tmp_path / "exit.json"
    assert ccl_exit_aborts.main(["--trials", "1", "--styles", "destroy", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    (row,) = data["rows"]
    assert row["style"] == "destroy" and row["exit_codes"] == [0, 0] and row["aborted_ranks"] == []
    assert data["summary"]["aborted_trials"] == 0 and data["machine"]["cpu family"]
    assert data["ccl"]["provider"] in ("autotune", "intel")


def _stale_segments_for_the_next_pids(count: int) -> list[tuple[os.PathLike, int]]:
    """Files named and sized as oneCCL's segments (`<pid>:0:0`, 64 MB) for the next `count` pids
    the kernel will hand out, as a killed rank on a host whose record is gone leaves them; the
    ones made here, with their inodes, so that only they are removed afterwards."""
    from autotune.comm.ccl.shm import SHM
    with open("/proc/loadavg", encoding="utf-8") as f:
        last = int(f.read().split()[4])
    with open("/proc/sys/kernel/pid_max", encoding="utf-8") as f:
        pid_max = int(f.read())
    made = []
    for n in range(1, count + 1):
        path = SHM / f"{(last + n) % pid_max}:0:0"
        try:
            with open(path, "x") as f:
                os.truncate(f.fileno(), 64 << 20)      # a segment's size, sparse: no memory
                made.append((path, os.fstat(f.fileno()).st_ino))
        except FileExistsError:
            pass
    return made


def test_a_rank_whose_pid_a_stale_segment_names_goes_on_under_a_fresh_pid(tmp_path):
    """A stale segment named with a new rank's pid failed its init_process_group ("fi_enable
    (endpoint) fails with ret: -16, Device or resource busy"): 3 of about 30 ccl runs of a search
    here, on a /dev/shm holding 359 stale segments. worker/fresh_pid.py moves such a rank."""
    from autotune.cli import main
    made = _stale_segments_for_the_next_pids(300)
    try:
        rc = main(["run", "--set", "backend=ccl", "--set", "nproc=2", "--set", "threads=1",
                   "--workload", "mlp", "--seconds", "1", "--results", str(tmp_path / "results"),
                   "--json"])
    finally:
        for path, inode in made:
            with contextlib.suppress(OSError):
                if os.stat(path).st_ino == inode:
                    os.unlink(path)
    logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "results").rglob("rank*.log"))
    assert rc == 0, logs[-3000:]
    assert logs.count("is named by a stale oneCCL segment") == 2, logs[-3000:]
    assert "Device or resource busy" not in logs


def test_ranks_that_end_cleanly_leave_no_shared_memory_behind(tmp_path):
    """The worker ends with os._exit, which skipped oneCCL's removal of its segments: every
    rank of every ccl trial left 64 MB in /dev/shm, removed afterwards only where the runner
    recorded it (never on the other hosts of a trial: two 2-host searches left 54 here). Ranks
    started by hand, as on another host, with no runner to clean up after them."""
    from autotune.comm.ccl import rank_env
    from autotune.comm.ccl.shm import named_for
    port, procs = str(free_port()), []
    for rank in range(2):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
               "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
               "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO),
               "AUTOTUNE_RESULT": str(tmp_path / f"rank{rank}.json")}
        env.update(rank_env(local_rank=rank, local_size=2, workers=1, yield_mode="sched_yield",
                            worker_cpus=None))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "autotune.worker", "--workload", "mlp", "--set",
             "backend=ccl", "--set", "threads=1", "--seconds", "1"], env=env, cwd=tmp_path,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-3000:]
    pids = [json.loads((tmp_path / f"rank{r}.json").read_text())["pid"] for r in range(2)]
    assert [name for pid in pids for name in named_for(pid)] == []
