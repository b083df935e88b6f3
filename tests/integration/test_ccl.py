"""The ccl backend (autotune/comm/ccl) with real processes: every collective and dtype against
gloo, DDP parity, a rank killed mid-all-reduce, the build cache, and the worker's own trial."""
from __future__ import annotations

from paths import REPO, TESTS
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


def test_status_names_the_provider():
    done = subprocess.run([sys.executable, "-m", "autotune.comm.ccl", "status"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() in ("ccl: available (autotune)",
                                                            "ccl: available (intel)")
