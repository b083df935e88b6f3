import torch

from autotune.worker.in_force import (autocast_name, differences, memory_bound_to, parse_maps,
                              parse_mem_policy, parse_mems_allowed)
from autotune.plan.launch_plan import RankExpect

TORCH_GOMP = "7f1 r-xp 0 08:01 1 /venv/lib/python3.11/site-packages/torch/lib/libgomp.so.1\n"
JEMALLOC = "7f2 r-xp 0 08:01 2 /usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n"
TCMALLOC = "7f3 r-xp 0 08:01 3 /usr/lib/x86_64-linux-gnu/libtcmalloc.so.4\n"
IOMP = "7f4 r-xp 0 08:01 4 /venv/lib/libiomp5.so\n"
ANON = "7f5 rw-p 0 00:00 0\n"


def test_parse_maps():
    assert parse_maps(TORCH_GOMP + ANON) == ("default", "libgomp")
    assert parse_maps(JEMALLOC + TORCH_GOMP) == ("jemalloc", "libgomp")
    assert parse_maps(TCMALLOC + IOMP + TORCH_GOMP) == ("tcmalloc", "libiomp5")
    assert parse_maps(JEMALLOC + TCMALLOC) == ("jemalloc+tcmalloc", "none")


def test_parse_mems_allowed():
    assert parse_mems_allowed("Name:\tpython\nMems_allowed:\t1\nMems_allowed_list:\t0-1\n") == "0-1"
    assert parse_mems_allowed("Name:\tpython\n") is None


def test_parse_mem_policy_and_binding():
    exe = " file=/usr/bin/python3.11 mapped=1 N0=1 kernelpagesize_kB=4\n7f2 default anon=1\n"
    assert parse_mem_policy("55ee2719c000 default" + exe) == "default"
    assert parse_mem_policy("55ee2719c000 bind:1" + exe) == "bind:1"
    assert parse_mem_policy("55ee2719c000 prefer (many):0-1" + exe) == "prefer (many):0-1"
    assert parse_mem_policy("") is None
    assert memory_bound_to(1, "bind:1", "0-1")
    assert memory_bound_to(0, "bind=static:0", "0-1")
    assert not memory_bound_to(0, "bind:0-1", "0-1")
    assert not memory_bound_to(1, "default", "0-1")       # numactl did not apply
    assert memory_bound_to(0, "default", "0")             # a 1-node machine or a cpuset
    assert not memory_bound_to(0, "interleave:0-1", "0-1")


def test_autocast_name():
    assert autocast_name(False, torch.bfloat16) == "fp32"
    assert autocast_name(True, torch.bfloat16) == "bf16"
    assert autocast_name(True, torch.float16) == "fp16"


def _expect(**kw):
    base = dict(cpus=(0, 1), threads=2, allocator="jemalloc", omp_runtime="libgomp",
                precision="bf16", mem_node=0)
    return RankExpect(**{**base, **kw})


IN_FORCE = {"affinity": [0, 1], "num_threads": 2, "allocator": "jemalloc", "omp_runtime": "libgomp",
            "mems_allowed": "0", "mem_policy": "default", "autocast_dtype": "bf16"}


def test_differences_none_when_matching():
    assert differences(_expect(), IN_FORCE) == []
    assert differences(_expect(cpus=None, threads=None, mem_node=None),
                       {**IN_FORCE, "affinity": [0], "num_threads": 7, "mems_allowed": "0-3"}) == []
    assert differences(_expect(mem_node=1), {**IN_FORCE, "mems_allowed": "0-1",
                                             "mem_policy": "bind:1"}) == []


def test_differences_name_each_knob():
    got = differences(_expect(cpus=(0, 1, 2, 5)), {**IN_FORCE, "num_threads": 4,
                                                   "allocator": "default",
                                                   "omp_runtime": "libiomp5", "mems_allowed": "1",
                                                   "autocast_dtype": "fp32"})
    assert got == ["affinity: planned 0-2,5, in force 0-1", "threads: planned 2, in force 4",
                   "allocator: planned jemalloc, in force default",
                   "omp_runtime: planned libgomp, in force libiomp5",
                   "mem_node: planned 0, in force policy default, mems_allowed 1",
                   "precision: planned bf16, in force fp32"]
