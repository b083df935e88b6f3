"""The in-force check confirms a memory policy from /proc/<pid>/numa_maps: literal text of each
policy the kernel prints, and real processes started under numactl (on this one-node machine
node 0 is the only node, which is enough to see the policy applied or not)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from autotune.plan.launch_plan import RankExpect
from autotune.probe.procfs import memory_placed, parse_mem_policy
from autotune.worker.in_force import differences

EXE = " file=/usr/bin/python3.11 mapped=1 N0=1 kernelpagesize_kB=4\n7f2 default anon=1\n"
# what the child prints: its own numa_maps policy, as the worker's collect() reads it
READ_POLICY = ("from autotune.probe.procfs import parse_mem_policy, read_proc; "
               "print(parse_mem_policy(read_proc('/proc/self/numa_maps')))")


@pytest.mark.parametrize("line, spec, placed", [
    ("55e8 interleave:0,4", "interleave:0,4", True),
    ("55e8 interleave=static:0,4", "interleave:0,4", True),
    ("55e8 interleave:0-1", "interleave:0,1", True),
    ("55e8 prefer:5", "preferred:5", True),
    ("55e8 weighted interleave:0,2", "weighted:0,2", True),
    ("55e8 default", "interleave:0,4", False),              # numactl did not apply
    ("55e8 interleave:0", "interleave:0,4", False),          # other nodes
    ("55e8 prefer:4", "interleave:4", False),                # another mode
    ("55e8 bind:0", "preferred:0", False),
])
def test_memory_placed_reads_the_kernels_policy_text(line, spec, placed):
    assert memory_placed(spec, parse_mem_policy(line + EXE)) is placed


def test_the_two_word_weighted_mode_is_read_whole():
    assert parse_mem_policy("55e8 weighted interleave:0,2" + EXE) == "weighted interleave:0,2"


def _expect(**kw) -> RankExpect:
    return RankExpect(cpus=None, threads=None, allocator=None, omp_runtime=None,
                      precision="fp32", **kw)


def _in_force(policy: str) -> dict:
    return {"affinity": [0], "num_threads": 1, "allocator": "default", "omp_runtime": "libgomp",
            "mems_allowed": "0", "mem_policy": policy, "autocast_dtype": "fp32"}


def _policy_of(argv_prefix: list[str]) -> str:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    out = subprocess.run([*argv_prefix, sys.executable, "-c", READ_POLICY], env=env,
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


@pytest.mark.skipif(not os.path.exists("/usr/bin/numactl"), reason="numactl not installed")
def test_a_real_process_under_numactl_shows_the_planned_policy():
    interleaved = _policy_of(["numactl", "--interleave=0"])
    preferred = _policy_of(["numactl", "--preferred=0"])
    plain = _policy_of([])
    assert (interleaved, preferred, plain) == ("interleave:0", "prefer:0", "default")
    assert differences(_expect(mem_policy="interleave:0"), _in_force(interleaved)) == []
    assert differences(_expect(mem_policy="preferred:0"), _in_force(preferred)) == []
    assert differences(_expect(mem_policy="interleave:0"), _in_force(plain)) == [
        "mem_policy: planned interleave:0, in force policy default"]


@pytest.mark.skipif(not os.path.exists("/usr/bin/numactl"), reason="numactl not installed")
def test_the_bind_shim_gives_each_launched_rank_its_policy():
    """torchrun/mpirun start every rank with one command: the shim picks rank 1's policy."""
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    env.pop("RANK", None)
    out = subprocess.run([sys.executable, "-m", "autotune.bind",
                          "--mem=preferred:0;interleave:0", "--", sys.executable, "-c",
                          READ_POLICY], env=env, capture_output=True, text=True, timeout=60,
                         check=True)
    assert out.stdout.strip() == "interleave:0"
