"""Where memory lives, with real processes (issue 37): numa_balancing put back after a search
stopped by SIGINT, SIGTERM, SIGHUP, a crash or SIGKILL (a temporary file in place of
/proc/sys/kernel/numa_balancing); a memory policy confirmed from the real /proc/<pid>/numa_maps
of processes started under numactl and under the bind shim (this machine has one node, node 0,
which is enough to see a policy applied or not)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from autotune.plan.launch_plan import RankExpect
from autotune.run.numa_quiet import QuietNuma, restore_stale
from autotune.worker.in_force import differences
from paths import REPO

# A search stand-in: numa_balancing quiet, says so, then waits to be stopped (or crashes).
CHILD = """
import sys, time
from autotune.run.numa_quiet import QuietNuma
with QuietNuma(path=sys.argv[1], marker=sys.argv[2], euid=0):
    print("quiet", flush=True)
    if sys.argv[3] == "crash":
        raise RuntimeError("a bug in the search")
    time.sleep(120)
"""
# What a rank's in-force check reads: its own task policy from numa_maps.
READ_POLICY = ("from autotune.probe.procfs import parse_mem_policy, read_proc; "
               "print(parse_mem_policy(read_proc('/proc/self/numa_maps')))")
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
NUMACTL = pytest.mark.skipif(not os.path.exists("/usr/bin/numactl"), reason="no numactl")


@pytest.fixture
def kernel(tmp_path):
    path = tmp_path / "numa_balancing"
    path.write_text("1\n")
    return path, tmp_path / "marker.json"


def start(kernel, how: str = "wait") -> subprocess.Popen:
    path, marker = kernel
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(marker), how],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    assert proc.stdout.readline().strip() == "quiet"
    if how == "wait":   # (a crashing one may be putting it back already)
        assert path.read_text() == "0\n" and json.loads(marker.read_text())["value"] == 1
    return proc


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_search_stopped_by_a_signal_puts_it_back(kernel, sig):
    path, marker = kernel
    proc = start(kernel)
    proc.send_signal(sig)
    proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert path.read_text() == "1\n" and not marker.exists()


def test_a_search_that_crashes_puts_it_back(kernel):
    path, marker = kernel
    proc = start(kernel, "crash")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "a bug in the search" in err
    assert path.read_text() == "1\n" and not marker.exists()


def test_a_killed_search_is_undone_by_the_next_one(kernel):
    path, marker = kernel
    proc = start(kernel)
    proc.kill()                      # SIGKILL: no handler, no atexit
    proc.wait(timeout=120)
    assert path.read_text() == "0\n" and marker.exists()
    # the next search with --quiet-numa (another real process) puts it back first, then
    # quiets it for itself, and puts it back at its own end
    nxt = start(kernel)
    nxt.send_signal(signal.SIGINT)
    nxt.communicate(timeout=120)
    assert path.read_text() == "1\n" and not marker.exists()
    # any later search as root, without --quiet-numa: restore_stale at its start
    proc = start(kernel)
    proc.kill()
    proc.wait(timeout=120)
    said = restore_stale(str(marker))
    assert said == f"numa_balancing put back to 1 in {path}: a search that died had turned it off"
    assert path.read_text() == "1\n" and not marker.exists()


def test_a_live_searchs_marker_is_left_alone(kernel):
    path, marker = kernel
    proc = start(kernel)
    try:
        assert restore_stale(str(marker)) is None           # its owner still runs
        with QuietNuma(path=str(path), marker=str(marker), euid=0) as second:
            assert second.before is None and "held off by another search" in second.said[0]
        assert path.read_text() == "0\n" and marker.exists()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
    assert path.read_text() == "1\n"


def _policy_of(argv_prefix: list[str], env: dict | None = None) -> str:
    out = subprocess.run([*argv_prefix, sys.executable, "-c", READ_POLICY], env=env or ENV,
                         capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.strip()


def _expect(spec: str) -> RankExpect:
    return RankExpect(cpus=None, threads=None, allocator=None, omp_runtime=None,
                      precision="fp32", mem_policy=spec)


def _in_force(policy: str) -> dict:
    return {"affinity": [0], "num_threads": 1, "allocator": "default", "omp_runtime": "libgomp",
            "mems_allowed": "0", "mem_policy": policy, "autocast_dtype": "fp32"}


@NUMACTL
def test_a_real_process_under_numactl_shows_the_planned_policy():
    interleaved = _policy_of(["numactl", "--interleave=0"])
    preferred = _policy_of(["numactl", "--preferred=0"])
    plain = _policy_of([])
    assert (interleaved, preferred, plain) == ("interleave:0", "prefer:0", "default")
    assert differences(_expect("interleave:0"), _in_force(interleaved)) == []
    assert differences(_expect("preferred:0"), _in_force(preferred)) == []
    assert differences(_expect("interleave:0"), _in_force(plain)) == [
        "mem_policy: planned interleave:0, in force policy default"]


@NUMACTL
def test_the_bind_shim_gives_each_launched_rank_its_policy():
    """torchrun and mpirun start every rank with one command: the shim picks rank 1's policy."""
    env = {**ENV, "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    env.pop("RANK", None)
    shim = [sys.executable, "-m", "autotune.bind", "--mem=preferred:0;interleave:0", "--"]
    assert _policy_of(shim, env) == "interleave:0"
