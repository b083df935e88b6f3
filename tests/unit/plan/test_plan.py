"""Launch plans on the captured machine shapes: no process is started here."""
from __future__ import annotations

from paths import TESTS
import dataclasses
import itertools
import json
from pathlib import Path

import pytest

from autotune.cli import main
from autotune.util.child_python import python_module
from autotune.config import Config
from autotune.errors import ConfigError
from autotune.plan.build import JEMALLOC_CONF, build_plan
from autotune.plan.placement import canonical
from autotune.plan.feasible import infeasible_reason
from autotune.probe import probe
from autotune.probe.topology import Capabilities

MACHINES = TESTS / "fixtures" / "machines"
CAPS = Capabilities(allocators={"jemalloc": "/lib/libjemalloc.so.2", "tcmalloc": "/lib/libtcmalloc.so.4"},
                    omp_runtimes={"libgomp": None, "libiomp5": "/venv/lib/libiomp5.so"},
                    backends=("gloo",), numactl=True, numactl_membind=True, taskset=True,
                    cxx_compiler="/usr/bin/c++")


def machine(name: str, **caps):
    topo = probe(str(MACHINES / name), collect_capabilities=False)
    return dataclasses.replace(topo, capabilities=dataclasses.replace(CAPS, **caps))


def plan(config: Config, topo, **kw):
    return build_plan(config, topo, workdir="/tmp/plan-test", master_port=29511,
                      base_env=kw.pop("base_env", {"PATH": "/usr/bin"}), **kw)


def test_two_socket_one_rank_per_node_binds_physical_cores_and_local_memory():
    topo = machine("xeon-2s-icx")
    p = plan(Config(nproc=2, binding="numactl"), topo)
    r0, r1 = p.ranks
    assert r0.cpus == tuple(range(0, 32)) and r1.cpus == tuple(range(32, 64))
    assert (r0.mem_node, r1.mem_node) == (0, 1)
    assert r0.argv[:3] == ("numactl", "--physcpubind=0-31", "--membind=0")
    assert r1.argv[:3] == ("numactl", "--physcpubind=32-63", "--membind=1")
    assert r0.env["OMP_NUM_THREADS"] == "32"  # one thread per physical core of the slice
    assert p.request.ranks[1].cpus == r1.cpus and p.request.ranks[1].mem_node == 1


def test_smt_binding_adds_the_sibling_threads_from_thread_siblings_list():
    topo = machine("xeon-2s-icx")  # CPU N and N+64 are siblings
    r0, r1 = plan(Config(nproc=2, binding="numactl_smt"), topo).ranks
    assert r0.cpus == tuple(range(0, 32)) + tuple(range(64, 96))
    assert r1.cpus == tuple(range(32, 64)) + tuple(range(96, 128))


def test_adjacent_siblings_desktop_uses_one_thread_per_core():
    topo = machine("desktop-8c16t")  # siblings 0/1, 2/3, ...
    r0, r1 = plan(Config(nproc=2, threads=4, binding="taskset"), topo).ranks
    assert r0.cpus == (0, 2, 4, 6) and r1.cpus == (8, 10, 12, 14)
    assert r0.argv[:3] == ("taskset", "-c", "0,2,4,6")


def test_ranks_per_numa_node_packs_ranks_per_numa_node():
    topo = machine("epyc-7763-nps4")
    ranks = plan(Config(nproc=8, ranks_per_numa_node=2, binding="numactl"), topo).ranks
    assert [r.mem_node for r in ranks] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert all(len(r.cpus) == 8 for r in ranks)  # 16 cores per node / 2 ranks


def test_memory_only_hbm_nodes_are_never_planned_on():
    topo = machine("spr-max-hbm-flat")
    ranks = plan(Config(nproc=4, binding="numactl"), topo).ranks
    assert sorted({r.mem_node for r in ranks}) == [0, 1]
    with pytest.raises(ConfigError, match="needs 4 NUMA nodes"):
        plan(Config(nproc=4, ranks_per_numa_node=1, binding="numactl"), topo)


def test_restricted_process_plans_only_on_what_it_may_use():
    topo = machine("xeon-2s-restricted")
    usable = set(topo.usable_cpus)
    r = plan(Config(nproc=1, binding="taskset"), topo).ranks[0]
    assert set(r.cpus) <= usable
    assert len(r.cpus) == topo.num_usable_cores()  # the cgroup quota caps the core count


def test_sparse_node_ids_from_a_vm():
    topo = machine("vm-quirks")
    ranks = plan(Config(nproc=2, binding="numactl"), topo).ranks
    assert [r.mem_node for r in ranks] == [0, 2]


@pytest.mark.parametrize("name", ["xeon-2s-icx", "epyc-7763-nps4", "desktop-8c16t",
                                  "spr-max-hbm-flat", "dgx-h100-8gpu", "pcie-4gpu"])
def test_ranks_get_disjoint_cpu_sets_for_every_feasible_config(name):
    topo = machine(name)
    checked = 0
    for nproc, threads, binding in itertools.product((1, 2, 3, 4, 8), (None, 1, 2, 8, 16),
                                                     ("taskset", "numactl", "numactl_smt")):
        config = Config(nproc=nproc, threads=threads, binding=binding)
        if infeasible_reason(config, topo):
            continue
        cpus = [set(r.cpus) for r in plan(config, topo).ranks]
        assert sum(map(len, cpus)) == len(set().union(*cpus)), (config, cpus)
        assert set().union(*cpus) <= set(topo.usable_cpus)
        checked += 1
    assert checked > 10


def test_environment_is_built_as_a_value_and_owns_what_it_sets():
    topo = machine("xeon-2s-icx")
    base = {"PATH": "/usr/bin", "LD_PRELOAD": "/evil.so", "OMP_NUM_THREADS": "99", "HOME": "/root"}
    r = plan(Config(allocator="jemalloc", omp_runtime="libiomp5", threads=4), topo, base_env=base).ranks[0]
    assert r.env["LD_PRELOAD"] == "/lib/libjemalloc.so.2:/venv/lib/libiomp5.so"
    assert r.env["MALLOC_CONF"] == JEMALLOC_CONF
    assert r.env["KMP_AFFINITY"] == "granularity=fine,compact,1,0" and r.env["KMP_BLOCKTIME"] == "1"
    assert r.env["OMP_NUM_THREADS"] == "4" and r.env["HOME"] == "/root"
    assert r.env["RANK"] == "0" and r.env["WORLD_SIZE"] == "1" and r.env["MASTER_PORT"] == "29511"
    default = plan(Config(), topo, base_env=base).ranks[0]
    assert "LD_PRELOAD" not in default.env and "OMP_NUM_THREADS" not in default.env
    assert base["LD_PRELOAD"] == "/evil.so"  # the caller's mapping is not touched


def test_default_launch_is_unbound_with_torch_default_threads():
    p = plan(Config(), machine("xeon-2s-icx"))
    (r,) = p.ranks
    assert r.cpus is None and r.mem_node is None and p.request.ranks[0].threads is None
    # the worker imports nothing from the current folder (-P; docs/security.md)
    assert r.argv == python_module("autotune.worker", "--request", p.request_path)


@pytest.mark.parametrize("config,caps,message", [
    (Config(nproc=2, threads=64), {}, "exceeds"),
    (Config(backend="ccl"), {}, "backend ccl not available"),
    (Config(allocator="tcmalloc"), {"allocators": {}}, "allocator tcmalloc not found"),
    (Config(omp_runtime="libiomp5"), {"omp_runtimes": {"libgomp": None}}, "intel-openmp"),
    (Config(binding="numactl"), {"numactl": False}, "numactl is missing"),
    (Config(binding="taskset"), {"taskset": False}, "taskset"),
    (Config(precision="fp16"), {}, "fp16"),
    (Config(ipex="on"), {}, "ipex"),
    (Config(compile=True), {"cxx_compiler": None}, "C++ compiler"),
    (Config(nproc=3, ranks_per_numa_node=2), {}, "not a multiple"),
    (Config(nproc=200), {}, "usable physical core"),
])
def test_infeasible_configs_are_ruled_out_with_a_reason(config, caps, message):
    topo = machine("xeon-2s-icx", **caps)
    reason = infeasible_reason(config, topo)
    assert reason and message in reason
    with pytest.raises(ConfigError):
        plan(config, topo)


def test_ccl_plan_reserves_a_core_for_the_ccl_worker():
    topo = machine("xeon-2s-icx", backends=("gloo", "ccl"))
    r0, r1 = plan(Config(nproc=2, backend="ccl", binding="numactl",
                         ccl_worker_affinity="dedicated"), topo).ranks
    assert r0.env["CCL_WORKER_COUNT"] == "1" and r0.env["CCL_ATL_TRANSPORT"] == "ofi"
    assert r0.env["CCL_WORKER_AFFINITY"] == r1.env["CCL_WORKER_AFFINITY"]  # the host's list
    assert (r0.env["CCL_LOCAL_RANK"], r1.env["CCL_LOCAL_RANK"]) == ("0", "1")
    ccl_core = int(r1.env["CCL_WORKER_AFFINITY"].split(",")[1])   # rank 1's slice
    assert ccl_core in r1.cpus and ccl_core in range(32, 64)  # bound with the rank...
    assert str(ccl_core) not in r1.env["GOMP_CPU_AFFINITY"].split(",")  # ...but not computing
    assert r1.env["OMP_NUM_THREADS"] == str(len(r1.cpus) - 1)
    # GOMP_CPU_AFFINITY binds the main thread to the compute cores: the rank's own in-force
    # check expects those, not the worker's core (a real trial said "planned 0-1, in force 0")
    p = plan(Config(nproc=2, backend="ccl", binding="numactl", ccl_worker_affinity="dedicated"), topo)
    assert ccl_core not in p.request.ranks[1].cpus and set(p.request.ranks[1].cpus) < set(r1.cpus)


def test_ccl_shared_workers_sit_on_the_ranks_last_core():
    topo = machine("xeon-2s-icx", backends=("gloo", "ccl"))
    r0, r1 = plan(Config(nproc=2, backend="ccl", binding="numactl", ccl_workers=2), topo).ranks
    workers = [int(c) for c in r0.env["CCL_WORKER_AFFINITY"].split(",")]
    assert workers[:2] == [r0.cpus[-1], r0.cpus[-2]] and workers[2:] == [r1.cpus[-1], r1.cpus[-2]]
    assert "GOMP_CPU_AFFINITY" not in r0.env and r0.env["OMP_NUM_THREADS"] == str(len(r0.cpus))
    assert r0.env["CCL_WORKER_COUNT"] == "2" and r0.env["CCL_YIELD"] == "sched_yield"


def test_dry_run_cli_plans_against_a_captured_machine(capsys):
    code = main(["run", "--sysfs-root", str(MACHINES / "epyc-7763-nps4"), "--set", "nproc=4",
                 "--set", "binding=taskset", "--dry-run", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["argv"][0] for r in out["ranks"]] == ["taskset"] * 4
    assert len({tuple(r["cpus"]) for r in out["ranks"]}) == 4


def test_dry_run_text_shows_commands_env_and_cpu_sets(capsys):
    assert main(["run", "--set", "threads=1", "--set", "binding=taskset", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "rank 0: cpus 0" in out and "OMP_NUM_THREADS=1" in out and "taskset -c 0" in out


@pytest.mark.parametrize("argv,needle", [
    (["run", "--set", "nproc=0", "--dry-run"], "nproc=0"),
    (["run", "--set", "colour=blue", "--dry-run"], "unknown knob 'colour'"),
    (["run", "--set", "precision=fp8", "--dry-run"], "fp32, bf16, fp16"),
    (["run", "--set", "threads", "--dry-run"], "expected knob=value"),
    (["run", "--set", "threads=two", "--dry-run"], "must be an integer"),
    (["run", "--set", "nproc=2", "--sysfs-root", "/nonexistent"], "--dry-run"),
    (["run", "--sysfs-root", "/nonexistent", "--dry-run"], "/nonexistent"),
])
def test_bad_run_input_is_one_line_exit_2(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


# ---- oneCCL plans on multi-socket machines ------------------------------------------------------
def _ccl_invariants(ranks) -> None:
    """With dedicated workers, oneCCL's worker thread sits on a core of the rank's own binding
    that none of any rank's OpenMP threads use (else every all-reduce competes with a GEMM
    thread). Every rank of a host gets the host's list; CCL_LOCAL_RANK picks its own entry."""
    from autotune.probe.parse import parse_cpulist
    compute = [set(parse_cpulist(r.env["GOMP_CPU_AFFINITY"])) for r in ranks]
    listed = [int(c) for c in ranks[0].env["CCL_WORKER_AFFINITY"].split(",")]
    assert len(listed) == len(ranks)
    for r, mine in zip(ranks, compute):
        assert r.env["CCL_WORKER_COUNT"] == "1" and r.env["CCL_ATL_TRANSPORT"] == "ofi"
        worker = listed[int(r.env["CCL_LOCAL_RANK"])]
        assert worker in r.cpus                            # within the rank's binding
        assert all(worker not in c for c in compute)       # disjoint from every rank's threads
        assert mine <= set(r.cpus) and r.env["OMP_NUM_THREADS"] == str(len(mine))
    assert len(set(listed)) == len(ranks)
    assert all(not (a & b) for i, a in enumerate(compute) for b in compute[i + 1:])


@pytest.mark.parametrize("name,config,nodes", [
    # EPYC 7763 in NPS4: 4 nodes x 16 cores, one rank per node
    ("epyc-7763-nps4", Config(nproc=4, backend="ccl", binding="numactl", ccl_worker_affinity="dedicated"), [0, 1, 2, 3]),
    # ... and 2 ranks per node, 8 cores each (7 compute + the oneCCL worker)
    ("epyc-7763-nps4", Config(nproc=8, ranks_per_numa_node=2, backend="ccl", binding="numactl",
                               ccl_worker_affinity="dedicated"),
     [0, 0, 1, 1, 2, 2, 3, 3]),
    # 2-socket Ice Lake, 2 ranks per socket
    ("xeon-2s-icx", Config(nproc=4, ranks_per_numa_node=2, backend="ccl", binding="numactl",
                           ccl_worker_affinity="dedicated"),
     [0, 0, 1, 1]),
    ("xeon-2s-icx", Config(nproc=4, ranks_per_numa_node=2, backend="ccl", binding="numactl_smt",
                           omp_runtime="libiomp5", ccl_worker_affinity="dedicated"), [0, 0, 1, 1]),
    # Sapphire Rapids Max in flat mode: HBM-only nodes 2 and 3 never get ranks
    ("spr-max-hbm-flat", Config(nproc=2, backend="ccl", binding="numactl",
                                ccl_worker_affinity="dedicated"), [0, 1]),
    ("spr-max-hbm-flat", Config(nproc=4, ranks_per_numa_node=2, threads=8, backend="ccl",
                                binding="taskset", ccl_worker_affinity="dedicated"), [0, 0, 1, 1]),
])
def test_ccl_plans_on_multi_socket_machines(name, config, nodes):
    topo = machine(name, backends=("gloo", "ccl"))
    assert infeasible_reason(config, topo) is None
    ranks = plan(config, topo).ranks
    if config.binding.startswith("numactl"):
        assert [r.mem_node for r in ranks] == nodes
    node_of = {cpu: n.id for n in topo.numa_nodes for cpu in n.cpus}
    assert [node_of[r.cpus[0]] for r in ranks] == nodes  # ranks land on compute nodes only
    _ccl_invariants(ranks)
    if config.threads:
        assert all(r.env["OMP_NUM_THREADS"] == str(config.threads) for r in ranks)


def test_ccl_with_one_core_per_rank_is_infeasible():
    topo = machine("epyc-7763-nps4", backends=("gloo", "ccl"))
    config = Config(nproc=64, ranks_per_numa_node=16, backend="ccl", binding="numactl",
                    ccl_worker_affinity="dedicated")
    reason = infeasible_reason(config, topo)
    assert reason and "needs 2 cores per rank" in reason
    with pytest.raises(ConfigError, match="oneCCL's workers"):
        plan(config, topo)
    # threads that fill the rank's cores leave none for the worker either
    assert "exceeds" in infeasible_reason(Config(nproc=4, threads=16, backend="ccl",
                                                 ccl_worker_affinity="dedicated"), topo)
    # shared workers need no core of their own
    assert infeasible_reason(config.with_(ccl_worker_affinity="shared", global_batch=64), topo) is None


def test_ccl_knob_mixes_ruled_out_before_launch():
    topo = machine("xeon-2s-icx", backends=("gloo", "ccl"))
    why = infeasible_reason(Config(nproc=2, backend="ccl", ccl_yield="pause"), topo)
    assert "busy-waits" in why
    assert infeasible_reason(Config(nproc=2, backend="ccl", ccl_yield="pause",
                                    ccl_worker_affinity="dedicated"), topo) is None
    assert "ccl_workers=2 needs 3 cores" in infeasible_reason(
        Config(nproc=32, backend="ccl", ccl_workers=2, ccl_worker_affinity="dedicated"), topo)
    with pytest.raises(ConfigError, match="ccl_workers=9"):
        Config(backend="ccl", ccl_workers=9)


def test_ccl_knobs_mean_nothing_to_gloo():
    topo = machine("xeon-2s-icx", backends=("gloo", "ccl"))
    assert canonical(Config(nproc=2, ccl_workers=2, ccl_yield="sleep"), topo) == canonical(Config(nproc=2), topo)
    assert canonical(Config(nproc=2, backend="ccl", ccl_workers=2), topo).ccl_workers == 2
    # one rank: nothing to reduce, so ccl on shared cores is gloo's launch, knobs and all
    assert canonical(Config(backend="ccl", ccl_workers=2), topo) == canonical(Config(), topo)
    dedicated = Config(backend="ccl", ccl_worker_affinity="dedicated")
    assert canonical(dedicated, topo).backend == "ccl"     # its worker cores leave the rank


def test_ccl_not_offered_says_why():
    from autotune.probe.capabilities import CCL_MISSING
    topo = machine("xeon-2s-icx", ccl_problem=CCL_MISSING)
    reason = infeasible_reason(Config(backend="ccl"), topo)
    assert "python -m autotune.comm.ccl build" in reason


def test_two_spellings_of_one_launch_are_one_configuration():
    topo = machine("live-epyc-2cpu")
    run_cpu_style = Config(binding="numactl", allocator="tcmalloc")  # threads left automatic
    explicit = Config(ranks_per_numa_node=1, threads=2, binding="numactl", allocator="tcmalloc")
    assert canonical(run_cpu_style, topo) == canonical(explicit, topo)
    assert canonical(Config(), topo) == Config()  # the default launch keeps torch's own threads
    xeon = machine("xeon-2s-icx")
    assert canonical(Config(nproc=2, ranks_per_numa_node=1, binding="numactl"), xeon).ranks_per_numa_node is None
    packed = Config(nproc=2, ranks_per_numa_node=2, binding="numactl")  # both ranks on node 0
    assert canonical(packed, xeon).ranks_per_numa_node == 2
    assert canonical(Config(nproc=64, threads=64), xeon) == Config(nproc=64, threads=64)  # infeasible


def test_dataloader_workers_beyond_the_cpus_a_rank_can_have_are_ruled_out():
    """Issue 46, item 9 (and the reason issue 43's feasibility reuses): unbound, a rank may use
    every CPU of the machine; bound, the CPU set it is given."""
    topo = machine("desktop-8c16t")                      # 8 cores, 16 CPUs
    assert infeasible_reason(Config(dataloader_workers=16), topo) is None
    assert infeasible_reason(Config(dataloader_workers=17), topo) == \
        "dataloader_workers=17: more than the 16 CPUs a rank can have here"
    bound = Config(nproc=4, binding="numactl", dataloader_workers=3)   # 2 cores, 2 CPUs each
    assert infeasible_reason(bound, topo) == \
        "dataloader_workers=3: more than the 2 CPUs a rank can have here"
    assert infeasible_reason(bound.with_(dataloader_workers=2), topo) is None
