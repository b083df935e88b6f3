"""A landscape model: the throughput of a launch configuration on a large CPU machine.

The machine comes from the probe's `Topology` (captured fixture or synthetic, see
benchmarks/landscapes/model_machines.py) plus the few vendor figures a Topology does not hold (`Hardware`).
The rank layout comes from the real planner (`autotune.plan.build`), so a rank has exactly the cores,
CPUs and threads a real trial would get. One training step of one rank then costs

    t_step = max(t_compute, t_memory) + t_fixed + t_allreduce_exposed        (slowest rank wins)

  t_compute  per-rank batch x per-sample work at one core, Amdahl over the rank's effective cores
             (Amdahl 1967), slowed by remote memory, oversubscription, allocator/OpenMP/binding;
  t_memory   the node's memory bandwidth shared by every rank on the node (roofline: Williams,
             Waterman, Patterson, CACM 52(4) 2009);
  t_fixed    per-step cost that does not shrink with threads (optimizer, Python, launch of ops);
  memory policy (mem_policy, issue 37; benchmarks/landscapes/memory_model.py): a rank's pages go to
             its policy's nodes (the real planner's, autotune/plan/memory.py) in the
             policy's proportions (equal for interleave, the kernel's weights for weighted, all
             on HBM for preferred_fast: the CNN's pages fit its 16 GiB); each node has a bandwidth (DRAM: the vendor figure
             below; memory-only: the firmware's HMAT/CDAT figure, or Hardware.memory_only_gbs)
             shared by every rank whose pages are on it, and a latency (HMAT, or SLIT distance
             / 10) that stalls the compute part as remote DRAM does. `Params.memory_share` is
             the workload's memory-bound share: how much of its activation traffic streams
             from memory (1: all of it, the built-in CNN as calibrated);
  allreduce  ring all-reduce alpha-beta cost 2(p-1)a + 2(p-1)/p * G/b (Thakur, Rabenseifner,
             Gropp, IJHPCA 19(1) 2005; Patarasuk & Yuan, JPDC 69(2) 2009), of which DDP hides
             `overlap` behind the backward pass (Li et al., "PyTorch Distributed", VLDB 13(12) 2020).

Throughput = ranks x per-rank batch / t_step. Every parameter is in `Params` with where it came
from; `calibrate()` fits the ones this 2-core machine can tell from its recorded landscape.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from autotune.config import Config
from autotune.plan.placement import placements  # the planner's own rank layout: cores, CPUs, threads
from autotune.probe.topology import Topology

from .memory_model import latency_ratio, mem_layout, node_bandwidth, reach

# The built-in `cnn` workload (autotune/worker/workloads.py, SmallResNet width 16, 32x32 inputs):
GRAD_BYTES = 78_042 * 4        # 78,042 parameters, all-reduced in fp32 even under autocast
# 204,810 activation values per sample (forward hooks on every leaf module, fp32). Training
# writes them forward, reads them backward and writes/reads their gradients: ~4 passes.
BYTES_PER_SAMPLE = 204_810 * 4 * 4


@dataclass(frozen=True, kw_only=True)
class Hardware:
    """Vendor figures the probe cannot see. Bandwidth is per NUMA node (socket peak / nodes)."""
    name: str
    node_bandwidth_gbs: float       # DRAM peak per compute node, GB/s (channels x MT/s x 8 B)
    core_speed: float = 1.0         # per-core fp32 speed relative to the calibration machine's vCPU
    bf16_gain: float | None = None  # bf16 speed-up of the compute part (None: Params' ISA value)
    vcpus_share_cores: bool = False  # cloud vCPUs: the 2 "cores" are SMT siblings of one core
    # a memory-only node's bandwidth (GB/s) where the capture has no HMAT figure for it
    memory_only_gbs: float | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.node_bandwidth_gbs <= 0 or self.core_speed <= 0:
            raise ValueError(f"Hardware {self.name}: bandwidth and core_speed must be > 0")


@dataclass(frozen=True, kw_only=True)
class Params:
    # -- calibrated on this machine's recorded landscape (calibrate(); docs/benchmarks.md has the fit) ------
    # (`python3 -m benchmarks.replay.at_scale --calibrate --refit`: R^2 0.93 on log throughput
    # over the 326 launched configurations of the Zen 5 machine's landscape, 2026-11-24; the
    # Zen 4 machine's landscape had given 1.8 ms, bf16 1.65, tcmalloc 1.28, R^2 0.85)
    sample_s: float = 0.8e-3      # fp32 seconds per sample on one core (fwd+bwd+step)
    fixed_s: float = 4.0e-3       # per-step seconds that do not scale with batch or threads
    bf16_gain: float = 1.45       # avx512_bf16 (Zen 5) on this CNN
    sibling_gain: float = 0.6     # second busy vCPU of the calibration VM adds this much
    allocator: tuple[tuple[str, float], ...] = (("default", 1.0), ("jemalloc", 1.28),
                                                ("tcmalloc", 1.38))
    libiomp5: float = 0.97        # relative to libgomp (on AMD; Intel: intel_omp_gain)
    taskset: float = 0.98         # pinned vs unbound threads on one node
    numactl: float = 0.99
    # -- set from the published shape, not identifiable on 2 cores ----------------------------
    serial: float = 0.01          # Amdahl serial share of a step's compute: chosen so that the
    #   model gives the book's +25% for several gloo ranks over one 64-thread process on a
    #   2-socket Xeon (M. M. Alves, "Accelerate Model Training with PyTorch 2.X", Packt 2024, ch. 9)
    #   with the per-sample cost above (0.005 gave it with the Zen 4 fit's 1.8 ms)
    # -- cited / assumed --------------------------------------------------------------------
    amx_bf16_gain: float = 2.0    # AMX tiles vs avx512 fp32 on small convs (Intel AMX docs claim
    #   up to several x on large GEMMs; small convs of this CNN gain far less): assumption
    smt_gain: float = 0.10        # a sibling hyperthread adds ~0-30% on throughput code; the
    #   PyTorch CPU tuning guide advises physical cores only for DL (pytorch.org/tutorials/
    #   recipes/recipes/tuning_guide.html): a low 10% is used
    intel_omp_gain: float = 1.04  # libiomp5 on Intel CPUs (tuning guide: "Intel OpenMP ... better")
    memory_stall: float = 0.25    # share of compute time stalled on DRAM latency (remote penalty)
    gloo_alpha_s: float = 30e-6   # gloo: TCP loopback transport, per message (assumption)
    gloo_beta_bps: float = 2.0e9  # gloo: bytes/s through loopback TCP (assumption)
    ccl_alpha_s: float = 4e-6     # oneCCL: shared-memory transport within a node (assumption)
    ccl_beta_bps: float = 10e9
    overlap: float = 0.5          # share of all-reduce hidden behind backward (Li et al. 2020)
    grad_bytes: float = GRAD_BYTES
    startup_s: float = 2.7        # measured here: launch to first step, 1-2 ranks (landscape)
    startup_per_rank_s: float = 0.03  # spawn + import torch of each extra rank (assumption)
    rendezvous_s: float = 2e-4    # gloo full-mesh connect, per rank pair (assumption)
    # The workload's memory-bound share: the part of its activation traffic (BYTES_PER_SAMPLE)
    # that streams from memory rather than staying in cache. 1.0 is the built-in CNN as the
    # model was calibrated (its figures do not change); a GEMM-bound model sits lower, an
    # embedding- or attention-heavy one higher (--memory-share of benchmarks/replay/at_scale.py).
    memory_share: float = 1.0

    def alloc(self, name: str) -> float:
        return dict(self.allocator).get(name, 1.0)


@dataclass(frozen=True)
class _Facts:
    physical: int
    logical: int
    nodes: int
    ratio_local: dict        # node -> mean latency ratio of a rank bound there (1.0)
    ratio_unbound: float     # pages and threads wandering over every compute node


_FACTS: dict[int, tuple[Topology, _Facts]] = {}


def _facts(topology: Topology) -> _Facts:
    """What the model reads from a Topology, computed once per machine (usable_cores() walks
    every CPU and is called on each configuration otherwise)."""
    hit = _FACTS.get(id(topology))
    if hit and hit[0] is topology:
        return hit[1]
    cores = topology.usable_cores()
    compute = [n.id for n in topology.compute_nodes()]
    f = _Facts(physical=len(cores), logical=sum(len(c.cpus) for c in cores),
               nodes=max(1, len(compute)), ratio_local={n: 1.0 for n in compute},
               ratio_unbound=_numa_ratio(topology, compute))
    _FACTS[id(topology)] = (topology, f)
    return f


def _numa_ratio(topology: Topology, spread: list) -> float:
    """Average memory-access latency relative to local (SLIT distance / 10, ACPI 6.x 5.2.17)
    when threads and first-touched pages spread evenly over `spread` nodes."""
    ids = [n.id for n in topology.numa_nodes]
    dist = topology.distances
    if not dist or len(spread) < 2:
        return 1.0
    tot = [dist[ids.index(a)][ids.index(b)] / 10.0 for a in spread for b in spread]
    return sum(tot) / len(tot)


_LAYOUTS: dict[tuple, tuple] = {}


def _layout(config: Config, topology: Topology) -> tuple[tuple[int, int, int, Any], ...]:
    """(threads, physical cores, logical CPUs, node) per rank, from the real planner (cached:
    only these knobs change it, and a Topology holds dicts so it cannot be a cache key)."""
    key = (id(topology), config.nproc, config.ranks_per_numa_node, config.threads, config.binding,
           config.backend)
    if key in _LAYOUTS:
        return _LAYOUTS[key]
    out = []
    for p in placements(config, topology):
        threads = p.threads or _facts(topology).physical  # torch default: physical cores
        out.append((threads, len(p.cores), len(p.cpus), p.node))
    _LAYOUTS[key] = tuple(out)
    return _LAYOUTS[key]


def allreduce_s(backend: str, ranks: int, grad_bytes: float, params: Params) -> float:
    """Ring all-reduce: 2(p-1) messages of G/p bytes each way."""
    if ranks < 2:
        return 0.0
    a, b = ((params.ccl_alpha_s, params.ccl_beta_bps) if backend == "ccl"
            else (params.gloo_alpha_s, params.gloo_beta_bps))
    return 2 * (ranks - 1) * a + 2 * (ranks - 1) / ranks * grad_bytes / b


def amdahl(n_eff: float, serial: float) -> float:
    """Time of a unit of work on n_eff cores relative to one core."""
    return serial + (1.0 - serial) / max(n_eff, 1e-9)


def step_seconds(config: Config, topology: Topology, hw: Hardware, params: Params) -> float:
    layout = _layout(config, topology)
    isa = topology.isa
    work = params.sample_s / hw.core_speed
    if config.precision in ("bf16", "fp16"):
        gain = hw.bf16_gain or (params.amx_bf16_gain if "amx_bf16" in isa.flags
                                else params.bf16_gain)
        work /= gain
    unbound = config.binding == "none"
    smt = config.binding.endswith("_smt")
    total_threads = sum(t for t, *_ in layout)
    facts = _facts(topology)
    physical, logical, nodes = facts.physical, facts.logical, facts.nodes
    eff = params.alloc(config.allocator)
    if config.omp_runtime == "libiomp5":
        eff *= params.intel_omp_gain if isa.vendor == "intel" else params.libiomp5
    eff *= {"taskset": params.taskset, "numactl": params.numactl}.get(
        config.binding.replace("_smt", ""), 1.0)
    ranks_on = {}
    for _, _, _, node in layout:
        ranks_on[node] = ranks_on.get(node, 0) + 1
    bytes_ = BYTES_PER_SAMPLE * (0.5 if config.precision != "fp32" else 1.0) * params.memory_share
    mems = mem_layout(config, topology)
    load: dict[int, float] = {}       # bytes every rank's step puts on each memory node
    for _, share in mems or ():
        for n, f in share.items():
            load[n] = load.get(n, 0.0) + f * _share(config) * bytes_
    worst = 0.0
    for rank, (threads, cores, cpus, node) in enumerate(layout):
        if hw.vcpus_share_cores:  # the VM: 2 vCPUs = 1 core's siblings, shared machine-wide
            busy = min(total_threads, logical)
            n_eff = min(threads, logical) * ((1 + params.sibling_gain) / 2 if busy > 1 else 1.0)
        elif unbound:  # the scheduler spreads threads over physical cores first
            n_eff = min(threads, physical) * min(1.0, physical / max(total_threads, 1))
            n_eff += max(0, min(total_threads, logical) - physical) * params.smt_gain / max(
                1, len(layout))
        elif smt:  # two threads per core share its FMA units
            on_cores = min(threads, cpus)
            n_eff = min(on_cores, cores) + max(0, on_cores - cores) * params.smt_gain
        else:
            n_eff = min(threads, cores)
        # More runnable threads than CPUs: OpenMP barriers wait for descheduled threads.
        avail = logical if unbound else (cpus if smt else cores)
        oversub = max(1.0, (total_threads if unbound else threads) / max(avail, 1))
        # A bound rank lives on one node (the planner never splits a rank across nodes).
        ratio = facts.ratio_unbound if unbound else 1.0
        if mems is not None:   # mem_policy: its nodes' latencies, their shared bandwidths
            cpu, share_of = mems[rank]
            ratio = latency_ratio(topology, cpu, share_of)
        compute = _share(config) * work * amdahl(n_eff, params.serial) * oversub
        compute *= 1 + params.memory_stall * (ratio - 1)
        compute /= eff
        if mems is None:
            share = len(layout) if unbound else ranks_on[node]
            bw = hw.node_bandwidth_gbs * 1e9 * (nodes if unbound else 1) / ratio
            memory = _share(config) * bytes_ * share / bw
        else:
            memory = max(load[n] * reach(topology, cpu, n) / node_bandwidth(topology, hw, n)
                         for n in share_of)
        worst = max(worst, max(compute, memory))
    ar = allreduce_s(config.backend, len(layout), params.grad_bytes, params) * (1 - params.overlap)
    return worst + params.fixed_s + ar


def _share(config: Config) -> int:
    """Samples each rank computes per step: its share of the global batch."""
    return max(1, config.global_batch // config.nproc)


def throughput(config: Config, topology: Topology, hw: Hardware, params: Params) -> float:
    return config.global_batch / step_seconds(config, topology, hw, params)


def trial_seconds(config: Config, thr: float, params: Params, window_s: float = 5.0,
                  warmup_steps: int = 3) -> float:
    """What one timed trial costs on the clock: start-up (grows with ranks: spawn, import,
    gloo's full-mesh rendezvous), warmup steps, the timed window, half a second of teardown."""
    p = config.nproc
    start = params.startup_s + params.startup_per_rank_s * (p - 1) + params.rendezvous_s * p * (p - 1) / 2
    step = config.global_batch / thr
    return start + warmup_steps * step + window_s + 0.5


# -- accuracy ---------------------------------------------------------------------------------
# The simulated machines assume issue 12's equal-math rule: the learning rate scales linearly with
# the global batch (Goyal et al., "Accurate, Large Minibatch SGD", 2017), which holds up to a
# critical batch (McCandlish et al., "An Empirical Model of Large-Batch Training", 2018); beyond
# it quality falls. A CIFAR-10-sized task has a small critical batch: 512 is assumed, and 1 pp
# lost per doubling beyond it. bf16 costs 0.2 pp (issue 12 measured no loss at 16k samples).
CRITICAL_BATCH = 512
BASE_ACCURACY = 0.90


def accuracy(global_batch: int, precision: str) -> float:
    drop = max(0.0, math.log2(global_batch / CRITICAL_BATCH)) * 0.01
    return BASE_ACCURACY - drop - (0.002 if precision != "fp32" else 0.0)


def with_params(params: Params, **changes: Any) -> Params:
    return dataclasses.replace(params, **changes)
