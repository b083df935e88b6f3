"""Search spaces: loading, resolution on several machines, grid, derived nproc, constraints, errors."""
from __future__ import annotations

from paths import REPO
import itertools
import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from autotune.config import Config
from autotune.errors import SpaceError
from autotune.space.expr import FUNCTIONS, ExprError
from autotune.space.resolve import (ResolvedSpace, default_space_path, find_space, load_space, parse_space,
                            resolve, spaces_dir, topology_names)
from autotune.probe.topology import Capabilities, Core, Gpu, Isa, NumaNode, Topology

CPU_YAML = REPO / "search_spaces" / "cpu.yaml"
GPU_YAML = REPO / "search_spaces" / "gpu.yaml"


def machine(*, sockets: int, cores_per_node: int, nodes: int, smt: int = 1, gpus: int = 0,
            flags: tuple[str, ...] = ("avx2",), usable: tuple[int, ...] = (),
            memory_only_nodes: int = 0, **caps) -> Topology:
    """A Topology built by hand: `nodes` NUMA nodes of `cores_per_node` cores, SMT siblings
    numbered like Linux does (cpu c and c + num_cores)."""
    num_cores = cores_per_node * nodes
    cores = tuple(Core(socket=c * sockets // num_cores, node=c // cores_per_node,
                       cpus=tuple(c + k * num_cores for k in range(smt))) for c in range(num_cores))
    numa = tuple(NumaNode(id=n, cpus=tuple(sorted(cpu for c in cores if c.node == n for cpu in c.cpus)),
                          memory_bytes=64 << 30) for n in range(nodes))
    numa += tuple(NumaNode(id=nodes + m, cpus=(), memory_bytes=128 << 30) for m in range(memory_only_nodes))
    logical = tuple(range(num_cores * smt))
    return Topology(sockets=sockets, logical_cpus=logical, cores=cores, numa_nodes=numa,
                    usable_cpus=usable or logical, isa=Isa(flags=tuple(sorted(flags))),
                    gpus=tuple(Gpu(index=i, name="NVIDIA H100", memory_bytes=80 << 30,
                                   numa_node=i * nodes // gpus) for i in range(gpus)),
                    capabilities=Capabilities(**caps))


# This machine: 2 AMD EPYC cores, 1 node, no SMT, avx512_bf16, everything installed.
LAPTOP = machine(sockets=1, cores_per_node=2, nodes=1, flags=("avx2", "avx512f", "avx512_bf16"),
                 allocators={"jemalloc": "/usr/lib/libjemalloc.so.2", "tcmalloc": "/usr/lib/libtcmalloc.so.4"},
                 omp_runtimes={"libgomp": None, "libiomp5": "/venv/lib/libiomp5.so"},
                 backends=("gloo",), numactl=True, taskset=True, cxx_compiler="g++")
# 2 x 32 cores, SMT, AMX with fp16 tiles (Granite Rapids' flags); jemalloc only, oneCCL installed.
XEON = machine(sockets=2, cores_per_node=32, nodes=2, smt=2,
               flags=("avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16", "amx_tile"),
               allocators={"jemalloc": "/usr/lib/libjemalloc.so.2", "tcmalloc": None},
               omp_runtimes={"libgomp": None, "libiomp5": None},
               backends=("gloo", "ccl"), numactl=True, taskset=True)
# EPYC Rome in NPS4: 4 nodes x 16 cores, SMT, a CXL memory-only node, in a container without
# numactl and without extra libraries.
EPYC = machine(sockets=1, cores_per_node=16, nodes=4, smt=2, memory_only_nodes=1,
               backends=("gloo",), taskset=True, ccl_problem="oneccl_bindings_for_pytorch not installed")
# 8 x H100 on 2 sockets of 24 cores.
DGX = machine(sockets=2, cores_per_node=24, nodes=2, smt=2, gpus=8, flags=("avx512f",),
              backends=("gloo", "nccl"), numactl=True, taskset=True, cuda=True)


def write(tmp_path: Path, text: str, name: str = "x.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def space_of(text: str, topology: Topology = LAPTOP, source: str = "x.yaml") -> ResolvedSpace:
    return resolve(parse_space(text, source=source), topology)


# ---- topology names ----------------------------------------------------------------------------
def test_topology_names_on_each_machine():
    names = {n: topology_names(t) for n, t in
             (("laptop", LAPTOP), ("xeon", XEON), ("epyc", EPYC), ("dgx", DGX))}
    assert {k: names["laptop"][k] for k in ("usable_cores", "cores_per_node", "numa_nodes",
                                          "logical_cpus", "smt", "gpus")} == \
        {"usable_cores": 2, "cores_per_node": 2, "numa_nodes": 1, "logical_cpus": 2, "smt": 1, "gpus": 0}
    assert names["laptop"]["found_allocators"] == ("default", "jemalloc", "tcmalloc")
    assert names["laptop"]["found_omp_runtimes"] == ("libgomp", "libiomp5")
    assert names["laptop"]["found_bindings"] == ("none", "taskset", "numactl")
    assert names["laptop"]["supported_precisions"] == ("fp32", "bf16")
    assert names["xeon"]["found_bindings"] == ("none", "taskset", "taskset_smt", "numactl", "numactl_smt")
    assert names["xeon"]["found_allocators"] == ("default", "jemalloc")  # tcmalloc: None = not found
    assert names["xeon"]["found_omp_runtimes"] == ("libgomp",)
    assert names["xeon"]["found_backends"] == ("gloo", "ccl")
    assert names["xeon"]["supported_precisions"] == ("fp32", "bf16", "fp16")
    assert (names["xeon"]["usable_cores"], names["xeon"]["logical_cpus"], names["xeon"]["smt"]) == (64, 128, 2)
    assert names["epyc"]["numa_nodes"] == 4  # the memory-only CXL node is not a compute node
    assert names["epyc"]["cores_per_node"] == 16
    assert names["epyc"]["found_bindings"] == ("none", "taskset", "taskset_smt")
    assert names["dgx"]["gpus"] == 8
    # the CPU's own precisions: gpu.yaml lists the GPU's, and the planner rule decides per device
    assert names["dgx"]["supported_precisions"] == ("fp32",)


def test_cores_per_node_is_the_smallest_usable_node_and_quota_caps_it():
    # Affinity leaves 3 cores on node 0 and 16 on node 1: "per node" must fit the small one.
    usable = (0, 1, 2) + tuple(range(16, 32))
    t = machine(sockets=1, cores_per_node=16, nodes=2, usable=usable)
    assert topology_names(t)["cores_per_node"] == 3
    assert topology_names(t)["usable_cores"] == 19
    from dataclasses import replace
    assert topology_names(replace(t, cpu_quota=2.0))["cores_per_node"] == 2


# ---- the shipped spaces ------------------------------------------------------------------------
# oneCCL's knobs where the ccl backend is not usable: one value each, so the space is unchanged
NO_CCL = {"ccl_workers": (1,), "ccl_worker_affinity": ("shared",), "ccl_yield": ("sched_yield",)}


def test_cpu_yaml_on_this_machine_exact_choices():
    space = resolve(load_space(CPU_YAML), LAPTOP)
    assert space.knobs == {
        "ranks_per_numa_node": (1, 2), "threads": (1, 2, None), "binding": ("none", "taskset", "numactl"),
        "allocator": ("default", "jemalloc", "tcmalloc"), "omp_runtime": ("libgomp", "libiomp5"),
        "ipex": ("off",), "precision": ("fp32", "bf16"), "compile": (False, True),
        "global_batch": (32, 64, 128), "backend": ("gloo",), **NO_CCL}
    # compile is offered where the machine compiles (a C++ compiler here; issue 59)
    assert space.fixed == {"lr_rule": "linear", "channels_last": False}
    assert space.size() == 648 * 2
    feasible = [p for p in space.grid() if not space.violations(p)]
    assert len(feasible) == 540 * 2  # 2 ranks x 2 threads oversubscribes 2 cores (auto is not judged)
    assert space.notes == ()


def test_cpu_yaml_on_xeon_exact_choices():
    space = resolve(load_space(CPU_YAML), XEON)
    assert space.knobs["ranks_per_numa_node"] == tuple(range(1, 33))
    assert space.knobs["threads"] == (1, 2, 4, 8, 16, 32, 64, None)  # a node's 32 divides 64
    assert space.knobs["binding"] == ("none", "taskset", "taskset_smt", "numactl", "numactl_smt")
    assert space.knobs["allocator"] == ("default", "jemalloc")
    assert space.knobs["omp_runtime"] == ("libgomp",)
    assert space.knobs["precision"] == ("fp32", "bf16", "fp16")
    assert space.knobs["backend"] == ("gloo", "ccl")
    # where ccl is usable its knobs vary: 1-2 workers, shared or dedicated cores, two wait modes
    assert (space.knobs["ccl_workers"], space.knobs["ccl_worker_affinity"], space.knobs["ccl_yield"]) \
        == ((1, 2), ("shared", "dedicated"), ("sched_yield", "pause"))
    assert space.size() == 32 * 8 * 5 * 2 * 1 * 3 * 3 * 2 * (2 * 2 * 2)
    assert space.to_config({"ranks_per_numa_node": 4, "threads": 8}).nproc == 8
    assert space.violations({"ranks_per_numa_node": 4, "threads": 8}) == []
    assert space.violations({"ranks_per_numa_node": 4, "threads": 16}) == ["threads * nproc <= usable_cores"]


def test_cpu_yaml_on_epyc_exact_choices():
    space = resolve(load_space(CPU_YAML), EPYC)
    assert space.knobs == {
        "ranks_per_numa_node": tuple(range(1, 17)), "threads": (1, 2, 4, 8, 16, 32, 64, None),
        "binding": ("none", "taskset", "taskset_smt"), "allocator": ("default",),
        "omp_runtime": ("libgomp",), "ipex": ("off",), "precision": ("fp32",),
        "global_batch": (32, 64, 128), "backend": ("gloo",), **NO_CCL}
    assert space.size() == 16 * 8 * 3 * 3
    assert space.to_config({"ranks_per_numa_node": 2}).nproc == 8  # 2 per node x 4 compute nodes


def test_cpu_yaml_on_gpu_box_excludes_nccl():
    space = resolve(load_space(CPU_YAML), DGX)
    assert space.knobs["backend"] == ("gloo",)
    assert space.knobs["ranks_per_numa_node"] == tuple(range(1, 25))
    assert space.knobs["threads"] == (1, 2, 3, 4, 6, 8, 12, 16, 24, 48, None)
    assert space.knobs["precision"] == ("fp32",)  # this CPU has no native bf16/fp16
    assert space.knobs["compile"] == (False, True)
    assert space.size() == 24 * 11 * 5 * 1 * 1 * 1 * 3 * 1 * 2


def test_gpu_yaml_on_gpu_box_exact_choices():
    space = resolve(load_space(GPU_YAML), DGX)
    assert space.knobs == {
        "nproc": (1, 2, 4, 8), "threads": (1, 2, 4), "numa_binding": ("none", "node", "socket",
                                                                      "exclusive"),
        "binding": ("none", "taskset", "taskset_smt", "numactl", "numactl_smt"),
        "backend": ("nccl", "gloo"), "precision": ("fp32", "bf16", "fp16"),
        "global_batch": (32, 64, 128), "channels_last": (False, True),
        # up to the cores a GPU's rank has besides its own thread: 48 cores / 8 GPUs - 1
        "dataloader_workers": (0, 1, 2, 4, 5), "pin_memory": (False, True),
        "compile": (False, True)}
    # no L3 groups in this hand-made topology: core-complex is dropped, saying why
    assert any(n.startswith("numa_binding=core-complex dropped") for n in space.notes)
    assert space.fixed == {"device": "cuda", "allocator": "default", "omp_runtime": "libgomp"}
    assert space.size() == 4 * 3 * 4 * 5 * 2 * 3 * 3 * 2 * 5 * 2 * 2
    # without Triton, GPUs do not compile: the knob is left out and the note says why
    no_triton = resolve(load_space(GPU_YAML), replace(DGX, capabilities=replace(
        DGX.capabilities, triton_problem="Triton is not installed; fix: pip install triton")))
    assert "compile" not in no_triton.knobs
    assert "compile=true dropped: Triton is not installed; fix: pip install triton" \
        in no_triton.notes
    assert space.to_config({"nproc": 8, "threads": 4}).ranks_per_numa_node is None
    assert space.violations({"nproc": 8, "threads": 4}) == []
    assert space.violations({"nproc": 8, "threads": 4, "dataloader_workers": 4}) == \
        ["(threads + dataloader_workers) * nproc <= usable_cores"]
    assert space.violations({"numa_binding": "node", "binding": "none"}) == \
        ["numa_binding == 'none' or binding != 'none'"]


@pytest.mark.parametrize("topology", [LAPTOP, XEON, EPYC], ids=["laptop", "xeon", "epyc"])
def test_gpu_yaml_without_gpus_fails_clearly(topology):
    with pytest.raises(SpaceError, match=r"gpu\.yaml: knobs\.nproc: no choice is left on this "
                                         r"machine \('powers_of_two\(gpus\)' gives no values with gpus=0\)"):
        resolve(load_space(GPU_YAML), topology)


@pytest.mark.parametrize("topology", [LAPTOP, XEON, EPYC, DGX], ids=["laptop", "xeon", "epyc", "dgx"])
def test_cpu_yaml_resolves_everywhere_and_has_a_feasible_config(topology):
    space = resolve(load_space(CPU_YAML), topology)
    assert any(not space.violations(p) for p in itertools.islice(space.grid(), 5000))
    for params in itertools.islice(space.grid(), 200):
        assert isinstance(space.to_config(params), Config)


def test_default_space_path_and_builtin_lookup(tmp_path):
    assert default_space_path(LAPTOP) == spaces_dir() / "cpu.yaml"
    assert default_space_path(DGX) == spaces_dir() / "gpu.yaml"
    assert spaces_dir() == REPO / "autotune" / "space" / "builtin"  # the package data, one copy
    assert find_space("gpu") == spaces_dir() / "gpu.yaml"
    assert find_space("cpu.yaml") == spaces_dir() / "cpu.yaml"
    own = write(tmp_path, "knobs: {threads: [1]}\n")
    assert find_space(str(own)) == own
    with pytest.raises(SpaceError, match=r"nope: search-space file not found \(built-in spaces: cpu, gpu\)"):
        find_space("nope")


def test_builtin_spaces_exist_once():
    """The checkout's search_spaces/ is the package data itself (a link), not a second copy that
    could drift from what an installed autotune ships."""
    assert (REPO / "search_spaces").resolve() == spaces_dir().resolve()
    assert sorted((REPO / "autotune").rglob("*.yaml")) == \
        [spaces_dir() / "cpu.yaml", spaces_dir() / "gpu.yaml"]


# ---- expressions, literals, dedup, availability --------------------------------------------------
def test_splittable_gives_a_batch_that_one_rank_per_node_can_split():
    split = FUNCTIONS["splittable"][1]
    assert [split(32, n) for n in (1, 2, 3, 4, 6, 8)] == [32, 32, 48, 32, 48, 32]
    assert [split(64, n) for n in (3, 6, 5)] == [96, 96, 80]   # whole multiples of 16 samples
    with pytest.raises(ExprError, match="positive"):
        split(32, 0)


def test_mixed_literals_and_expressions_are_coerced_and_deduplicated():
    space = space_of("""
knobs:
  threads: [1, "2", divisors(usable_cores), auto, usable_cores * 2, "max(1, usable_cores // 4)"]
  batch_size: {choices: ["range(1, 3)", powers_of_two(8), 16], exclude: [2, 3]}
  channels_last: [yes, "false", true]
""")
    assert space.knobs["threads"] == (1, 2, None, 4)
    assert space.knobs["batch_size"] == (1, 4, 8, 16)
    assert space.knobs["channels_last"] == (True, False)


def test_unavailable_literals_are_dropped_with_a_reason():
    space = space_of("""
knobs:
  allocator: [default, jemalloc, tcmalloc]
  backend: [gloo, ccl, nccl]
  binding: [none, numactl, numactl_smt]
  omp_runtime: [libgomp, libiomp5]
  ipex: [off, on]
""", EPYC)
    assert space.knobs == {"allocator": ("default",), "backend": ("gloo",), "binding": ("none",),
                           "omp_runtime": ("libgomp",), "ipex": ("off",)}
    assert space.notes == (
        "allocator=jemalloc dropped: jemalloc not found (apt-get install libjemalloc2)",
        "allocator=tcmalloc dropped: tcmalloc not found (apt-get install libgoogle-perftools4)",
        "backend=ccl dropped: oneccl_bindings_for_pytorch not installed",
        "backend=nccl dropped: needs NVIDIA GPUs and a CUDA build of torch",
        "binding=numactl dropped: numactl not usable here (apt-get install numactl; containers may forbid it)",
        "binding=numactl_smt dropped: numactl not usable here (apt-get install numactl; containers may forbid it)",
        "omp_runtime=libiomp5 dropped: Intel OpenMP (libiomp5) not found (pip install intel-openmp)",
        "ipex=on dropped: IPEX not importable (pip install intel-extension-for-pytorch)",
    )


def test_one_precision_rule_for_the_space_and_the_planner():
    """fp16 on a CPU without native fp16 is ruled out by the planner; a space that also has cuda
    trials keeps fp16 for those, and must never say CPU trials emulate it (they would be ruled
    out). bf16 without native support is emulated, and the planner runs it."""
    from autotune.plan.feasible import cpu_precision, precision_problem
    both = space_of("knobs:\n  device: [cpu, cuda]\n  precision: [fp32, bf16, fp16]\n"
                    "  numa_binding: [none]\n", DGX)
    assert both.knobs["precision"] == ("fp32", "bf16", "fp16")
    notes = [n for n in both.notes if n.startswith("precision=")]
    assert notes == [
        "precision=bf16 kept: this CPU has no native bf16 math, so CPU trials emulate it, "
        "usually slower than fp32",
        "precision=fp16 kept for cuda trials only: precision fp16: this CPU has no native fp16 "
        "training (amx_fp16; with avx512_fp16 alone, fp16 convolution gradients run oneDNN's "
        "reference kernel), so CPU trials with it are ruled out"]
    for topo in (LAPTOP, XEON, EPYC, DGX):
        for precision in ("fp32", "bf16", "fp16"):
            how = cpu_precision(precision, topo)
            assert (precision_problem(precision, "cpu", topo) is None) == (how != "unsupported")
            assert precision_problem(precision, "cuda", topo) is None
            assert (precision in topology_names(topo)["supported_precisions"]) == (how == "native")
    assert precision_problem("fp16", "cpu", XEON) is None and cpu_precision("bf16", EPYC) == "emulated"


def test_fp16_needs_amx_fp16_not_avx512_fp16_alone():
    """Issue 35: on a Sapphire Rapids class CPU (avx512_fp16 and AMX-BF16, no AMX-FP16) torch
    2.13's oneDNN computed every fp16 conv weight gradient with its reference kernel: the cnn's
    fp16 step took 4.3 s against 75 ms in fp32. fp16 is ruled out there; bf16 stays native."""
    from autotune.plan.feasible import cpu_precision, precision_problem
    spr = machine(sockets=1, cores_per_node=2, nodes=1,
                  flags=("avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile"))
    assert spr.isa.fp16   # it has the instructions...
    assert cpu_precision("fp16", spr) == "unsupported"   # ...but not a fast fp16 backward
    assert "amx_fp16" in precision_problem("fp16", "cpu", spr)
    assert cpu_precision("bf16", spr) == "native"
    assert topology_names(spr)["supported_precisions"] == ("fp32", "bf16")
    assert cpu_precision("fp16", XEON) == "native" and precision_problem("fp16", "cpu", XEON) is None


def test_smt_bindings_dropped_without_siblings_and_precisions_by_the_planner_rule():
    space = space_of("knobs:\n  binding: [taskset, taskset_smt]\n  precision: [fp32, fp16]\n"
                     "  compile: [false, true]\n", LAPTOP)
    assert space.knobs == {"binding": ("taskset",), "precision": ("fp32",), "compile": (False, True)}
    assert "binding=taskset_smt dropped: no SMT siblings among the usable CPUs" in space.notes
    # the planner rules fp16 out on a CPU without native fp16, so the space never offers it
    assert ("precision=fp16 dropped: precision fp16: this CPU has no native fp16 training "
            "(amx_fp16; with avx512_fp16 alone, fp16 convolution gradients run oneDNN's "
            "reference kernel)") in space.notes
    emulated = space_of("knobs:\n  precision: [fp32, bf16]\n", EPYC)
    assert emulated.knobs["precision"] == ("fp32", "bf16")
    assert any(n.startswith("precision=bf16 kept: this CPU has no native bf16") for n in emulated.notes)
    no_cxx = space_of("knobs:\n  compile: [false, true]\n", EPYC)
    assert "compile" not in no_cxx.knobs   # not offered where it cannot run (issue 59)
    assert no_cxx.notes == ("compile=true dropped: no C++ compiler found; fix: apt-get install g++",)


# ---- grid, derivation, constraints -------------------------------------------------------------
def test_grid_is_every_combination_first_knob_slowest():
    space = space_of("knobs:\n  threads: [1, 2]\n  allocator: [default, jemalloc]\n  batch_size: [32]\n")
    assert space.size() == 4
    assert list(space.grid()) == [
        {"threads": 1, "allocator": "default", "batch_size": 32},
        {"threads": 1, "allocator": "jemalloc", "batch_size": 32},
        {"threads": 2, "allocator": "default", "batch_size": 32},
        {"threads": 2, "allocator": "jemalloc", "batch_size": 32}]
    assert list(space.knobs) == ["threads", "allocator", "batch_size"]


def test_to_config_merges_fixed_and_derives_nproc():
    space = space_of("knobs:\n  ranks_per_numa_node: [1, 2]\nfixed:\n  threads: 4\n  precision: bf16\n"
                     "constraints: []\n", EPYC)
    cfg = space.to_config({"ranks_per_numa_node": 2})
    assert (cfg.nproc, cfg.ranks_per_numa_node, cfg.threads, cfg.precision) == (8, 2, 4, "bf16")
    # an explicit nproc (the study passes full configs) is kept, not re-derived
    assert space.to_config({"nproc": 2, "ranks_per_numa_node": 2}).nproc == 2
    both = space_of("knobs:\n  nproc: [1, 2]\n  ranks_per_numa_node: [1, 2]\n", XEON)
    assert both.to_config({"nproc": 2, "ranks_per_numa_node": 1}).nproc == 2
    assert both.violations({"nproc": 1, "ranks_per_numa_node": 2}) == \
        ["ranks_per_numa_node=2 is larger than nproc=1"]


def test_default_constraint_skips_auto_threads_and_explicit_empty_list_disables_it():
    space = space_of("knobs:\n  threads: [auto, 2]\n  nproc: [1, 2]\n")
    assert space.constraints == ("threads * nproc <= usable_cores",)
    assert space.violations({"threads": None, "nproc": 2}) == []
    assert space.violations({"threads": 2, "nproc": 2}) == ["threads * nproc <= usable_cores"]
    free = space_of("knobs:\n  threads: [2]\n  nproc: [2]\nconstraints: []\n")
    assert free.violations({"threads": 2, "nproc": 2}) == []


def test_constraint_language():
    space = space_of("""
knobs:
  nproc: [1, 2]
  precision: [fp32, bf16]
  backend: [gloo]
  channels_last: [false, true]
constraints:
  - global_batch_size <= 16 * nproc
  - precision == "fp32" or nproc == 1
  - not channels_last
  - 1 <= nproc * 2 - 1 < usable_cores + 2
  - nproc // 2 != 3
  - threads <= min(usable_cores, 8) or threads > max(64, -nproc)
""")
    assert space.violations({"nproc": 2, "precision": "fp32", "channels_last": False}) == []
    assert space.violations({"nproc": 2, "threads": 3}) == [space.constraints[-1]]
    assert space.violations({"nproc": 2, "threads": None}) == []
    assert space.violations({"nproc": 1, "precision": "bf16", "channels_last": True}) == \
        ["global_batch_size <= 16 * nproc", "not channels_last"]
    assert space.violations({"nproc": 2, "precision": "bf16", "channels_last": False}) == \
        ['precision == "fp32" or nproc == 1']
    assert space.to_json()["constraints"][0] == "global_batch_size <= 16 * nproc"


def test_spec_is_checked_without_a_machine():
    spec = load_space(CPU_YAML)
    assert spec.name == "cpu" and spec.source == str(CPU_YAML)
    assert list(spec.knobs)[0] == "ranks_per_numa_node"
    assert parse_space("knobs: {threads: [1]}\n", source="dir/mine.yaml").name == "mine"


# ---- bad input: one line naming file, key and problem ------------------------------------------
BAD = [
    ("[1, 2]\n", "x.yaml: top level must be a mapping with a 'knobs' key, got a list"),
    ("", "x.yaml: top level must be a mapping with a 'knobs' key, got nothing"),
    ("knobs:\n  threads: [1\n", "x.yaml: line 3, column 1: invalid YAML"),
    ("knobs:\n  threads: [1]\n  threads: [2]\n", "x.yaml: line 3, column 3: invalid YAML: duplicate key 'threads'"),
    ("knob:\n  threads: [1]\n", "x.yaml: unknown key 'knob'; valid keys: name, description, knobs, fixed"),
    ("name: cpu\n", "x.yaml: knobs: must be a non-empty mapping of knob -> choices, got nothing"),
    ("knobs: [threads]\n", "x.yaml: knobs: must be a non-empty mapping of knob -> choices, got a list"),
    ("knobs:\n  foo: [1]\n", "x.yaml: knobs.foo: unknown knob 'foo'; valid knobs: nproc, ranks_per_numa_node, threads"),
    ("knobs:\n  threads:\n    choices: []\n", "x.yaml: knobs.threads.choices: empty list"),
    ("knobs:\n  threads: {choices: [1, abc]}\n", "x.yaml: knobs.threads.choices[1]: threads='abc' must be an integer"),
    ("knobs:\n  threads: {choices: 4}\n", "x.yaml: knobs.threads.choices: expected a list of values, got the integer 4"),
    ("knobs:\n  threads: {values: [1]}\n", "x.yaml: knobs.threads: unknown key 'values'; valid keys: choices, exclude"),
    ("knobs:\n  threads: {exclude: [1]}\n", "x.yaml: knobs.threads: missing 'choices'"),
    ("knobs:\n  threads: [[1, 2]]\n", "x.yaml: knobs.threads[0]: expected a value or an expression, got a list"),
    ("knobs:\n  threads: [0]\n", "x.yaml: knobs.threads[0]: threads=0: must be a positive integer"),
    ("knobs:\n  threads: ['divisor(usable_cores)']\n",
     "x.yaml: knobs.threads[0]: unknown function 'divisor' in 'divisor(usable_cores)'; valid functions: divisors, range"),
    ("knobs:\n  threads: ['divisors(usable_core)']\n",
     "x.yaml: knobs.threads[0]: unknown name 'usable_core' in 'divisors(usable_core)'; valid names: usable_cores"),
    ("knobs:\n  threads: ['usable_cores / 2']\n", "x.yaml: knobs.threads[0]: operator / (use // for whole numbers)"),
    ("knobs:\n  threads: ['range(1)']\n", "x.yaml: knobs.threads[0]: range() takes 2 argument(s)"),
    ("knobs:\n  threads: ['divisors(usable_cores']\n", "x.yaml: knobs.threads[0]: 'divisors(usable_cores' is not a valid expression"),
    ("knobs:\n  threads: [found_backends]\n",
     "x.yaml: knobs.threads[0]: 'found_backends' gives a list of names, but threads takes integers"),
    ("knobs:\n  allocator: [found_backends]\n",
     "x.yaml: knobs.allocator[0]: 'found_backends' does not give allocator values; use names or found_allocators"),
    ("knobs:\n  allocator: [jemaloc]\n",
     "x.yaml: knobs.allocator[0]: allocator='jemaloc' is not valid; choose one of: default, jemalloc, tcmalloc"),
    ("knobs:\n  compile: [maybe]\n", "x.yaml: knobs.compile[0]: compile='maybe' must be true or false"),
    ("knobs:\n  threads: [1]\nfixed:\n  threads: 2\n",
     "x.yaml: fixed.threads: also listed under knobs; a knob is either searched or fixed"),
    ("knobs:\n  threads: [1]\nfixed:\n  color: red\n", "x.yaml: fixed.color: unknown knob 'color'"),
    ("knobs:\n  threads: [1]\nfixed:\n  batch_size: [1, 2]\n", "x.yaml: fixed.batch_size: must be a single value, got a list"),
    ("knobs:\n  threads: [1]\nfixed: [compile]\n", "x.yaml: fixed: must be a mapping of knob -> value, got a list"),
    ("knobs:\n  threads: [1]\nconstraints: threads < 2\n",
     "x.yaml: constraints: expected a list of rules, got text 'threads < 2'"),
    ("knobs:\n  threads: [1]\nconstraints: ['thread * nproc <= usable_cores']\n",
     "x.yaml: constraints[0]: unknown name 'thread' in 'thread * nproc <= usable_cores'; valid names:"),
    ("knobs:\n  threads: [1]\nconstraints: ['threads * nproc']\n",
     "x.yaml: constraints[0]: 'threads * nproc' is not a comparison"),
    ("knobs:\n  threads: [1]\nconstraints: ['precision < 3']\n",
     "x.yaml: constraints[0]: <, <=, >, >= compare integers in 'precision < 3'"),
    ("knobs:\n  threads: [1]\nconstraints: ['threads in [1, 2]']\n",
     "x.yaml: constraints[0]: comparison 'in' is not allowed"),
    ("knobs:\n  threads: [1]\nconstraints: ['__import__(\"os\").system(\"true\") == 0']\n",
     "x.yaml: constraints[0]: unknown function"),
    ("knobs:\n  threads: [1]\nconstraints: [3]\n",
     "x.yaml: constraints[0]: expected a rule such as 'threads * nproc <= usable_cores', got the integer 3"),
    ("name: [cpu]\nknobs:\n  threads: [1]\n", "x.yaml: name: must be text, got a list"),
]


@pytest.mark.parametrize("text, message", BAD, ids=[m.split(": ", 2)[1][:40] for _, m in BAD])
def test_bad_space_files_name_file_key_and_problem(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(SpaceError) as info:
        load_space(path)
    got = str(info.value)
    assert "\n" not in got
    assert got.startswith(str(path) + ": ")
    assert message.replace("x.yaml", str(path)) in got, got


BAD_ON_THIS_MACHINE = [
    ("knobs:\n  allocator: [jemalloc]\n", EPYC,
     "x.yaml: knobs.allocator: no choice is left on this machine (allocator=jemalloc dropped: "
     "jemalloc not found (apt-get install libjemalloc2))"),
    ("knobs:\n  backend: {choices: [found_backends], exclude: [gloo]}\n", LAPTOP,
     "x.yaml: knobs.backend: no choice is left on this machine (every value is excluded (gloo))"),
    ("knobs:\n  threads: ['divisors(usable_cores - 2)']\n", LAPTOP,
     "x.yaml: knobs.threads[0]: divisors() needs a positive integer, got 0"),
    ("knobs:\n  threads: ['usable_cores - 3']\n", LAPTOP,
     "x.yaml: knobs.threads[0]: 'usable_cores - 3' gives -1: threads=-1: must be a positive integer"),
    ("knobs:\n  threads: ['usable_cores // gpus']\n", LAPTOP,
     "x.yaml: knobs.threads[0]: division by zero in 'usable_cores // gpus'"),
    ("knobs:\n  threads: [1]\nfixed:\n  backend: ccl\n", LAPTOP,
     "x.yaml: fixed.backend: ccl cannot run here: the ccl backend is not set up (python -m autotune.comm.ccl build)"),
    ("knobs:\n  threads: [4, 8]\n", LAPTOP,
     "x.yaml: constraints: no combination of the choices satisfies them on this machine "
     "(threads * nproc <= usable_cores)"),
    ("knobs:\n  ranks_per_numa_node: [2, 3]\nconstraints: ['nproc <= numa_nodes']\n", XEON,
     "x.yaml: constraints: no combination of the choices satisfies them"),
]


@pytest.mark.parametrize("text, topology, message", BAD_ON_THIS_MACHINE,
                         ids=[m.split(": ", 2)[1][:40] for _, _, m in BAD_ON_THIS_MACHINE])
def test_bad_spaces_for_this_machine_fail_at_resolve(tmp_path, text, topology, message):
    path = write(tmp_path, text)
    spec = load_space(path)
    with pytest.raises(SpaceError) as info:
        resolve(spec, topology)
    got = str(info.value)
    assert got.startswith(str(path) + ": ") and "\n" not in got
    assert message.replace("x.yaml", str(path)) in got, got


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(SpaceError, match=r"nope\.yaml: search-space file not found"):
        load_space(tmp_path / "nope.yaml")
    with pytest.raises(SpaceError, match=r": cannot read search-space file \(IsADirectoryError"):
        load_space(tmp_path)
    bad = tmp_path / "bin.yaml"
    bad.write_bytes(b"\xff\xfe\x00knobs")
    with pytest.raises(SpaceError, match=r"bin\.yaml: cannot read search-space file \(UnicodeDecodeError"):
        load_space(bad)


def test_readme_example_resolves():
    text = (REPO / "search_spaces" / "README.md").read_text()
    example = re.search(r"```yaml\n(.*?)```", text, re.S).group(1)
    space = space_of(example, LAPTOP, source="README.md")
    assert space.knobs["allocator"] == ("default", "jemalloc", "tcmalloc")
    assert space.size() == 2 * 2 * 3 * 1 * 3
    assert space.addresses == {"kmp_blocktime": ("compute",)}



@settings(max_examples=40, deadline=None)
@given(cores=st.integers(1, 12), nodes=st.integers(1, 4), smt=st.integers(1, 2),
       numactl=st.booleans(), taskset=st.booleans(), jemalloc=st.booleans(), bf16=st.booleans())
def test_cpu_yaml_resolves_on_any_cpu_machine(cores, nodes, smt, numactl, taskset, jemalloc, bf16):
    t = machine(sockets=1, cores_per_node=cores, nodes=nodes, smt=smt, numactl=numactl,
                taskset=taskset, allocators={"jemalloc": "/lib/libjemalloc.so.2" if jemalloc else None},
                flags=("avx512_bf16",) if bf16 else ())
    space = resolve(load_space(CPU_YAML), t)
    assert space.knobs["ranks_per_numa_node"] == tuple(range(1, cores + 1))
    assert len(space.knobs["binding"]) == 1 + (1 + (smt > 1)) * (numactl + taskset)
    assert space.size() == len(list(space.grid()))
    first = next(space.grid())
    assert space.to_config(first).nproc == first["ranks_per_numa_node"] * nodes


# ---- IPEX: offered only where the probe says it imports and matches torch -----------------------
def test_cpu_yaml_offers_ipex_only_when_probed_usable():
    from dataclasses import replace
    usable = replace(LAPTOP, capabilities=replace(LAPTOP.capabilities, ipex_version="2.8.0+cpu"))
    assert topology_names(usable)["found_ipex"] == ("off", "on")
    assert resolve(load_space(CPU_YAML), usable).knobs["ipex"] == ("off", "on")
    mismatched = replace(LAPTOP, capabilities=replace(
        LAPTOP.capabilities, ipex_problem="intel-extension-for-pytorch 2.8.0 needs torch 2.8.*, "
                                          "found 2.13.0+cpu"))
    assert topology_names(mismatched)["found_ipex"] == ("off",)
    space = space_of("knobs:\n  ipex: [off, on]\n", mismatched)
    assert space.knobs["ipex"] == ("off",)
    assert any("needs torch 2.8.*" in note for note in space.notes)
