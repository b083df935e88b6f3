"""GPU launches planned on captured GPU servers: no GPU and no process is needed here.

Five topologies: a DGX H100 (8 NVLink GPUs, 2 sockets), 4 PCIe GPUs on 2 sockets, 8 PCIe GPUs on
2 sockets, 4 GPUs behind one socket only, and an NPS4 EPYC whose GPUs hang off 2 of its 4 nodes.
"""
from __future__ import annotations

from paths import TESTS
import dataclasses
from pathlib import Path

import pytest

from autotune.util.child_python import python_module
from autotune.config import Config
from autotune.export.command import launch_command, render
from autotune.plan.build import build_plan
from autotune.plan.placement import canonical
from autotune.plan.feasible import infeasible_reason, ruled_out
from autotune.probe import probe
from autotune.probe.parse import parse_l3
from autotune.search.references import default_launch, reference_configs
from autotune.space.resolve import default_space_path, find_space, load_space, parse_space, resolve
from autotune.probe.topology import Capabilities

MACHINES = TESTS / "fixtures" / "machines"
GPU_CAPS = Capabilities(backends=("gloo", "nccl"), numactl=True, numactl_membind=True,
                        taskset=True, cuda=True, cxx_compiler="/usr/bin/c++")
GPU_MACHINES = ("dgx-h100-8gpu", "pcie-4gpu", "pcie-8gpu-2s", "gpus-one-socket", "epyc-nps4-4gpu",
                "h200-emr-16c")


def machine(name: str, **caps):
    topo = probe(str(MACHINES / name), collect_capabilities=False)
    return dataclasses.replace(topo, capabilities=dataclasses.replace(GPU_CAPS, **caps))


def plan(config: Config, topo):
    return build_plan(config, topo, workdir="/tmp/gpu-plan-test", master_port=29512,
                      base_env={"PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "7"})


def gpu_config(topo, **kw) -> Config:
    return Config(**{"device": "cuda", "backend": "nccl", "nproc": len(topo.gpus), **kw})


def node_cpus(topo, node: int) -> set[int]:
    return set(next(n.cpus for n in topo.numa_nodes if n.id == node))


@pytest.mark.parametrize("name", GPU_MACHINES)
@pytest.mark.parametrize("mode", ["node", "exclusive", "core-complex"])
def test_each_rank_runs_on_its_gpus_numa_node(name, mode):
    topo = machine(name)
    config = gpu_config(topo, numa_binding=mode, binding="numactl_smt")
    if mode == "core-complex" and not topo.l3_domains:
        assert "no L3 cache groups" in infeasible_reason(config, topo)
        return
    p = plan(config, topo)
    assert len(p.ranks) == len(topo.gpus)
    for r, (rank, gpu) in enumerate(zip(p.ranks, sorted(topo.gpus, key=lambda g: g.index))):
        assert rank.cpus and set(rank.cpus) <= node_cpus(topo, gpu.numa_node), (r, rank.cpus)
        assert set(rank.cpus) <= set(gpu.cpu_affinity)           # what nvidia-smi calls near
        assert rank.mem_node is None                             # torchrun binds no memory
        assert rank.argv[0] == "numactl" and rank.argv[1].startswith("--physcpubind=")
        assert rank.env["CUDA_VISIBLE_DEVICES"] == ",".join(str(g.index) for g in topo.gpus)
        assert rank.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and rank.env["LOCAL_RANK"] == str(r)
        assert p.request.ranks[r].device == f"cuda:{r}" and p.request.ranks[r].backend == "nccl"
        assert int(rank.env["OMP_NUM_THREADS"]) >= 1


@pytest.mark.parametrize("name", ["pcie-8gpu-2s", "gpus-one-socket", "epyc-nps4-4gpu"])
def test_exclusive_splits_each_node_between_its_gpus(name):
    topo = machine(name)
    ranks = plan(gpu_config(topo, numa_binding="exclusive", binding="numactl"), topo).ranks
    sets = [set(r.cpus) for r in ranks]
    assert sum(map(len, sets)) == len(set().union(*sets))      # disjoint
    per_node: dict[int, set[int]] = {}
    for gpu, cpus in zip(topo.gpus, sets):
        per_node.setdefault(gpu.numa_node, set()).update(cpus)
    for node, cpus in per_node.items():                         # together, the whole node
        assert cpus == {c.cpus[0] for c in topo.usable_cores() if c.node == node}


def test_gpus_behind_one_socket_leave_the_other_socket_unused():
    topo = machine("gpus-one-socket")
    for mode in ("node", "socket", "exclusive"):
        ranks = plan(gpu_config(topo, numa_binding=mode, binding="numactl"), topo).ranks
        assert set().union(*(set(r.cpus) for r in ranks)) <= node_cpus(topo, 0)
    # 16 cores of node 0 shared by 4 ranks: 4 threads each unless told otherwise
    node = plan(gpu_config(topo, numa_binding="node", binding="numactl"), topo).ranks
    assert [r.env["OMP_NUM_THREADS"] for r in node] == ["4"] * 4
    assert "oversubscribes" in infeasible_reason(
        gpu_config(topo, numa_binding="node", binding="numactl", threads=8), topo)


def test_nps4_modes_differ_as_torchrun_defines_them():
    topo = machine("epyc-nps4-4gpu")   # GPUs 0-1 on node 0, 2-3 on node 2; 8-core CCXs
    assert len(topo.l3_domains) == 8 and all(len(d) == 16 for d in topo.l3_domains)

    def cpus(mode):
        return [r.cpus for r in plan(gpu_config(topo, numa_binding=mode, binding="numactl"),
                                     topo).ranks]
    assert cpus("node") == [tuple(range(0, 16))] * 2 + [tuple(range(32, 48))] * 2
    assert cpus("socket") == [tuple(range(64))] * 4        # one socket holds all four nodes
    assert cpus("core-complex") == [tuple(range(0, 8)), tuple(range(8, 16)),
                                    tuple(range(32, 40)), tuple(range(40, 48))]
    smt = plan(gpu_config(topo, numa_binding="core-complex", binding="numactl_smt"), topo).ranks
    assert smt[0].cpus == tuple(range(0, 8)) + tuple(range(64, 72))  # the CCX's SMT siblings


def test_a_subset_of_gpus_and_the_unbound_default():
    topo = machine("dgx-h100-8gpu")
    p = plan(gpu_config(topo, nproc=2), topo)
    assert [r.env["CUDA_VISIBLE_DEVICES"] for r in p.ranks] == ["0,1", "0,1"]
    assert all(r.cpus is None and r.argv == python_module("autotune.worker", "--request",
                                                          p.request_path) for r in p.ranks)
    # a binding tool without a numa_binding mode has nothing to apply: one launch, one spelling
    tool_only = gpu_config(topo, nproc=2, binding="numactl")
    assert plan(tool_only, topo).ranks[0].cpus is None
    assert canonical(tool_only, topo).binding == "none"


@pytest.mark.parametrize("config,caps,message", [
    (Config(device="cuda", nproc=2), {"cuda": False}, "cannot use CUDA"),
    (Config(device="cuda", nproc=16), {}, "one rank per GPU"),
    (Config(device="cuda", numa_binding="node"), {}, "needs a tool"),
    (Config(device="cuda", nproc=2, ranks_per_numa_node=1), {}, "follow their GPUs"),
    (Config(device="cuda", ipex="on"), {}, "ipex on"),
    (Config(numa_binding="node", binding="numactl"), {}, "needs device=cuda"),
    (Config(backend="nccl"), {}, "needs device=cuda"),
    (Config(pin_memory=True), {}, "needs device=cuda"),
])
def test_gpu_configs_ruled_out_with_a_reason(config, caps, message):
    reason = infeasible_reason(config, machine("pcie-4gpu", **caps))
    assert reason and message in reason


def test_fp16_one_rule_for_the_space_and_the_planner():
    """fp16: native on every CUDA GPU; on a CPU only with amx_fp16 (this Cascade
    Lake has neither). The space drops exactly what the planner would rule out, with its words."""
    topo = machine("pcie-4gpu")
    assert not topo.isa.fp16
    cpu_space = parse_space("name: t\nknobs:\n  precision:\n    choices: [fp32, fp16]\n",
                            source="t.yaml")
    cpu = resolve(cpu_space, topo)
    planner = infeasible_reason(Config(precision="fp16"), topo)
    assert cpu.knobs["precision"] == ("fp32",)
    assert planner and any(planner in note for note in cpu.notes)
    gpu = resolve(load_space(find_space("gpu")), topo)
    assert "fp16" in gpu.knobs["precision"]
    assert infeasible_reason(gpu_config(topo, precision="fp16"), topo) is None
    assert ruled_out(gpu_config(topo, precision="fp16", batch_size=32), gpu, topo) is None


def test_gpu_space_on_gpu_machines():
    for name in GPU_MACHINES:
        topo = machine(name)
        assert default_space_path(topo).name == "gpu.yaml"
        space = resolve(load_space(default_space_path(topo)), topo)
        assert space.fixed["device"] == "cuda"
        assert ("core-complex" in space.knobs["numa_binding"]) == bool(topo.l3_domains)
    # GPUs that this torch cannot drive: the CPU space, not a space of unrunnable trials
    assert default_space_path(machine("pcie-4gpu", cuda=False)).name == "cpu.yaml"


def test_references_are_torchrun_and_its_numa_binding_heuristic():
    topo = machine("dgx-h100-8gpu")
    space = resolve(load_space(find_space("gpu")), topo)
    base = default_launch(space, topo)
    (_, default), (_, heuristic) = reference_configs(topo, base)
    assert (default.device, default.nproc, default.backend, default.numa_binding) == \
        ("cuda", 8, "nccl", "none")
    assert default.threads == 1   # torchrun's OMP_NUM_THREADS=1 for several processes
    assert (heuristic.numa_binding, heuristic.binding) == ("node", "numactl_smt")
    assert ruled_out(default, space, topo) is None and ruled_out(heuristic, space, topo) is None
    r0 = plan(heuristic, topo).ranks[0]
    assert r0.cpus == tuple(range(0, 56)) + tuple(range(112, 168))  # node 0 with its siblings


def test_gpu_exports_use_torchrun_numa_binding_where_it_matches_else_numactl_per_rank():
    topo = machine("pcie-8gpu-2s")
    same = render(launch_command(gpu_config(topo, numa_binding="node", binding="numactl_smt"),
                                 topo, python="python"), "torchrun")
    assert "--numa-binding=node" in same and "--nproc-per-node=8" in same
    assert "autotune.bind" not in same and "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7" in same
    assert "--set=device=cuda" in same and "--set=backend=nccl" in same
    # physical cores only: torchrun has no such mode, so every rank gets its own numactl
    own = render(launch_command(gpu_config(topo, numa_binding="exclusive", binding="numactl"),
                                topo, python="python"), "torchrun")
    assert "--numa-binding" not in own
    assert "--cpus=0-7;8-15;16-23;24-31;32-39;40-47;48-55;56-63" in own


def test_l3_groups_parse_and_ignore_non_l3_index3():
    files = {"devices/system/cpu/cpu0/cache/index3/shared_cpu_list": "0-1\n",
             "devices/system/cpu/cpu1/cache/index3/shared_cpu_list": "0-1\n",
             "devices/system/cpu/cpu2/cache/index3/shared_cpu_list": "2-3\n",
             "devices/system/cpu/cpu2/cache/index3/level": "2\n"}
    assert parse_l3(files, (0, 1, 2, 3), root="t") == ((0, 1),)
    assert parse_l3({}, (0, 1), root="t") == ()


class GpuSim:
    """A GPU server where NCCL, bf16, exclusive CPUs and DataLoader workers help (a formula)."""

    def __init__(self):
        self.t, self.calls = 0.0, []

    def elapsed(self) -> float:
        return self.t

    @staticmethod
    def speed(c: Config) -> float:
        s = 1000.0 * c.nproc * (0.9 if c.nproc > 1 and c.backend == "gloo" else 1.0)
        s *= {"fp32": 1.0, "bf16": 2.0, "fp16": 2.1}[c.precision]
        s *= {"none": 1.0, "node": 1.05, "socket": 1.0, "exclusive": 1.15,
              "core-complex": 1.1}[c.numa_binding]
        return s * (1.2 if c.dataloader_workers else 1.0) * (1.05 if c.pin_memory else 1.0)

    def __call__(self, c: Config, mode: str, seed: int = 0, samples: int | None = None):
        from autotune.result import Outcome
        from autotune.result import TrialResult
        self.calls.append((c, mode))
        self.t += 10.0
        if mode == "accuracy":
            noise = (0.0, 0.002, -0.002)[seed % 3]
            return TrialResult(outcome=Outcome.OK, seconds=10.0,
                               accuracy=0.9 - (0.05 if c.precision == "fp16" else 0) + noise)
        return TrialResult(outcome=Outcome.OK, throughput=self.speed(c), seconds=10.0)


def test_a_gpu_search_starts_from_torchrun_and_verifies_against_it(tmp_path):
    from autotune.recommend.verify import verify
    from autotune.search.lineup import pick_candidates
    from autotune.search.loop import run_search
    from autotune.search.options import SearchOptions
    from autotune.search.references import make_sampler
    from autotune.study.records import Role
    from autotune.study.storage import open_storage, open_study
    from autotune.study.records import records
    topo = machine("epyc-nps4-4gpu")
    space = resolve(load_space(find_space("gpu")), topo)
    sim = GpuSim()
    study = open_study(open_storage(f"sqlite:///{tmp_path}/s.db"), "gpu", sampler=make_sampler(0))
    res = run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
                     options=SearchOptions(budget_s=1500, min_trial_s=10, patience=100,
                                           quality_samples=1000))
    measured = [c for c, mode in sim.calls if mode == "throughput"]
    assert measured[0] == default_launch(space, topo)            # torchrun, 4 GPUs, unbound
    assert (measured[1].numa_binding, measured[1].binding) == ("node", "numactl_smt")
    assert all(c.device == "cuda" and not infeasible_reason(c, topo) for c in measured)
    assert {Role.DEFAULT, Role.RUN_CPU} <= {r.role for r in records(study)}
    rec = verify(pick_candidates(res.records), res.default, sim, rounds=2)
    assert rec.verified and rec.config.precision != "fp16"       # fp16 lost 5 points
    assert rec.speedup == pytest.approx(sim.speed(rec.config) / sim.speed(res.default.config))
    assert rec.speedup > 1.5 and rec.vs_run_cpu and rec.vs_run_cpu > 1.0


def test_l3_groups_and_cuda_survive_the_stored_topology():
    from autotune.probe.topology import Topology
    topo = machine("epyc-nps4-4gpu")
    back = Topology.from_json(topo.to_json())
    assert back.l3_domains == topo.l3_domains and back.capabilities.cuda
    assert back.fingerprint() == topo.fingerprint()
    assert [r.cpus for r in plan(gpu_config(back, numa_binding="core-complex", binding="numactl"),
                                 back).ranks] == \
        [r.cpus for r in plan(gpu_config(topo, numa_binding="core-complex", binding="numactl"),
                              topo).ranks]


def test_gpus_without_a_numa_node_bind_only_where_the_node_is_certain():
    from autotune.probe.topology import Gpu
    na = (Gpu(index=0, name="NVIDIA L4", memory_bytes=24 << 30),)   # nvidia-smi said N/A
    vm = dataclasses.replace(machine("desktop-8c16t"), gpus=na)      # one NUMA node: it is that
    (r0,) = plan(gpu_config(vm, numa_binding="node", binding="numactl"), vm).ranks
    assert r0.cpus == tuple(range(0, 16, 2))
    two = dataclasses.replace(machine("pcie-4gpu"), gpus=na)         # two nodes: unknown
    assert "has no NUMA node" in infeasible_reason(
        gpu_config(two, numa_binding="node", binding="numactl"), two)
    space = resolve(load_space(find_space("gpu")), two)
    assert space.knobs["numa_binding"] == ("none",)


def test_knobs_added_for_gpus_leave_stored_keys_unchanged():
    """Studies and recorded landscapes are keyed by Config.key(): a CPU launch keeps its key."""
    old = ("allocator=default,backend=gloo,binding=none,channels_last=False,"
           "compile=False,ipex=off,kmp_affinity=granularity=fine,compact,1,0,kmp_blocktime=1,"
           "nproc=1,nproc_per_node=None,omp_runtime=libgomp,precision=fp32,threads=None")
    assert Config().key() == old
    assert Config(device="cuda").key() != old and "device=cuda" in Config(device="cuda").key()
    assert Config(dataloader_workers=2).key() != Config(dataloader_workers=4).key()


def test_gpu_ranks_get_no_more_dataloader_workers_than_the_machine_has_cpus():
    topo = machine("dgx-h100-8gpu")                      # 224 CPUs
    assert infeasible_reason(gpu_config(topo, dataloader_workers=300), topo) == \
        "dataloader_workers=300: more than the 224 CPUs a rank can have here"
    assert infeasible_reason(gpu_config(topo, dataloader_workers=8), topo) is None
