"""Simulated large machines, their modelled landscapes, and the calibration on this machine.

Machines are probe Topologies: three captured fixtures (tests/fixtures/machines) and two built
here. Bandwidths are vendor peak figures (channels x MT/s x 8 bytes) divided over the NUMA nodes:
  xeon-2s-icx       2 x Xeon Platinum 8358 (32 cores, SMT), 8 x DDR4-3200 per socket = 204.8 GB/s
  epyc-7763-nps4    EPYC 7763 (64 cores, SMT) in NPS4: 8 x DDR4-3200 = 204.8 GB/s / 4 nodes
  spr-max-hbm-flat  2 x Xeon Max 9480 (56 cores, SMT, AMX): 8 x DDR5-4800 = 307.2 GB/s per socket;
                    the HBM nodes are memory-only and the planner binds ranks to the DDR nodes
  gnr-snc3          synthetic: 1 x Xeon 6980P-like (128 cores, SMT, AMX) in SNC3, nodes of
                    43/43/42 cores: 12 x DDR5-6400 = 614.4 GB/s / 3 nodes
  xeon-2x56         synthetic: 2 x Xeon Platinum 8480+ (56 cores, SMT, AMX), 307.2 GB/s per socket
  xeon-max-snc4-flat  1 x Xeon Max 9480 in flat SNC4 (issue 37): 76.8 GB/s of DDR5 per quadrant,
                    and each quadrant's HBM2e stack as a memory-only node, 409.6 GB/s (its HMAT)
  xeon-2s-cxl       2 x 52-core Sapphire Rapids with a CXL expander per socket (issue 37):
                    307.2 GB/s of DDR5 per socket, 51.2 GB/s per expander (its CDAT)
The HBM nodes of spr-max-hbm-flat have no HMAT in that capture: 4 HBM2e stacks per socket,
4 x 409.6 = 1638.4 GB/s (Hardware.memory_only_gbs).
Every library is taken as found (jemalloc, tcmalloc, libiomp5, numactl, taskset) and oneCCL on
the Intel machines, so the space is as large as it gets there.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from pathlib import Path
from typing import Any

from autotune.result import Outcome
from autotune.config import Config
from autotune.plan.feasible import ruled_out
from autotune.search.references import reference_configs
from autotune.space.resolve import find_space, load_space, resolve
from autotune.probe.topology import Capabilities, Core, Isa, NumaNode, Topology

from benchmarks import ROOT

from .table import SCHEMA, Landscape, math_key
from .model import Hardware, Params, accuracy, step_seconds, throughput, trial_seconds

FIXTURES = ROOT / "tests" / "fixtures" / "machines"
AMX = ("amx_bf16", "amx_int8", "amx_tile", "avx2", "avx512_bf16", "avx512_fp16", "avx512f")


def _caps(intel: bool) -> Capabilities:
    return Capabilities(allocators={"jemalloc": "/lib/libjemalloc.so.2",
                                    "tcmalloc": "/lib/libtcmalloc.so.4"},
                        omp_runtimes={"libgomp": None, "libiomp5": "/lib/libiomp5.so"},
                        backends=("gloo", "ccl") if intel else ("gloo",),
                        numactl=True, numactl_membind=True, numactl_weighted=True, taskset=True)


def synthetic_topology(*, sockets: int, node_cores: list[list[int]], distances: list[list[int]],
                       model: str, flags: tuple[str, ...] = AMX) -> Topology:
    """SMT-2 machine: node_cores[socket] lists each node's core count; CPU n's sibling is
    n + total cores (Linux's numbering on Intel servers)."""
    total = sum(map(sum, node_cores))
    cores, nodes, cpu, nid = [], [], 0, 0
    for s, per_node in enumerate(node_cores):
        for n in per_node:
            ids = list(range(cpu, cpu + n))
            cores += [Core(socket=s, node=nid, cpus=(c, c + total)) for c in ids]
            nodes.append(NumaNode(id=nid, cpus=tuple(sorted(ids + [c + total for c in ids])),
                                  memory_bytes=256 << 30))
            cpu, nid = cpu + n, nid + 1
    return Topology(sockets=sockets, logical_cpus=tuple(range(2 * total)), cores=tuple(cores),
                    numa_nodes=tuple(nodes), distances=tuple(tuple(r) for r in distances),
                    isa=Isa(vendor="intel", model_name=model, flags=flags),
                    capabilities=_caps(True))


def _fixture(name: str, intel: bool) -> Topology:
    from autotune.probe import probe
    return dataclasses.replace(probe(str(FIXTURES / name), collect_capabilities=False),
                               capabilities=_caps(intel))


def machines() -> dict[str, tuple[Topology, Hardware]]:
    snc3 = [[10, 12, 12], [12, 10, 12], [12, 12, 10]]
    two = [[10, 21], [21, 10]]
    return {
        "xeon-2s-icx": (_fixture("xeon-2s-icx", True),
                        Hardware(name="xeon-2s-icx", node_bandwidth_gbs=204.8)),
        "epyc-7763-nps4": (_fixture("epyc-7763-nps4", False),
                           Hardware(name="epyc-7763-nps4", node_bandwidth_gbs=51.2)),
        "spr-max-hbm-flat": (_fixture("spr-max-hbm-flat", True),
                             Hardware(name="spr-max-hbm-flat", node_bandwidth_gbs=307.2,
                                      memory_only_gbs=1638.4)),
        "xeon-max-snc4-flat": (_fixture("xeon-max-snc4-flat", True),
                               Hardware(name="xeon-max-snc4-flat", node_bandwidth_gbs=76.8)),
        "xeon-2s-cxl": (_fixture("xeon-2s-cxl", True),
                        Hardware(name="xeon-2s-cxl", node_bandwidth_gbs=307.2)),
        "gnr-snc3": (synthetic_topology(sockets=1, node_cores=[[43, 43, 42]], distances=snc3,
                                        model="Intel(R) Xeon(R) 6980P (synthetic SNC3)"),
                     Hardware(name="gnr-snc3", node_bandwidth_gbs=204.8)),
        "xeon-2x56": (synthetic_topology(sockets=2, node_cores=[[56], [56]], distances=two,
                                         model="Intel(R) Xeon(R) Platinum 8480+ (synthetic)"),
                      Hardware(name="xeon-2x56", node_bandwidth_gbs=307.2)),
    }


def capture_machine(path: str | Path, bandwidth_gbs: float) -> tuple[str, Topology, Hardware]:
    """A machine from a /sys capture (`autotune probe --capture DIR`) and its DRAM bandwidth per
    NUMA node, the one figure a capture cannot hold: a new machine needs no code. Its libraries
    are taken as found, as for the machines above (oneCCL on Intel). Raises ProbeError for a
    folder that is not a capture and ValueError for a bandwidth <= 0."""
    if not bandwidth_gbs > 0:   # also catches NaN
        raise ValueError(f"--bandwidth must be more than 0 GB/s per NUMA node, got {bandwidth_gbs:g}")
    from autotune.errors import ProbeError
    from autotune.probe import probe
    try:
        topology = probe(str(path), collect_capabilities=False)
    except ProbeError as e:
        raise ValueError(f"--capture {path}: not a /sys capture ({e}); write one with "
                         "`autotune probe --capture DIR` on the machine") from None
    if not topology.usable_cores():
        raise ValueError(f"capture {path}: no usable cores to simulate")
    topology = dataclasses.replace(topology, capabilities=_caps(topology.isa.vendor == "intel"))
    name = f"capture-{Path(path).resolve().name}"
    return name, topology, Hardware(name=name, node_bandwidth_gbs=bandwidth_gbs,
                                    note=f"captured at {Path(path).resolve()}")


_INFEASIBLE = {"outcome": Outcome.INFEASIBLE, "seconds": 0.0, "throughput": None}


def model_landscape(name: str, topology: Topology, hw: Hardware, params: Params = Params(),
                    window_s: float = 5.0, space_name: str = "cpu") -> Landscape:
    """Every configuration of the space resolved on `topology` by the real space code, answered
    by the model: the same table benchmarks/landscapes/table.py records on a real machine."""
    space = resolve(load_space(find_space(space_name)), topology)
    land = Landscape({"schema": SCHEMA, "fingerprint": f"model-{name}", "topology": topology.to_json(),
                      "space": space.to_json(), "library_versions": {}, "workload": "model:cnn",
                      "target_seconds": window_s, "rows": {}, "accuracy": {}, "synthetic": True})
    configs = [(role, c, None) for role, c in reference_configs(topology, Config())]
    configs += [("grid", space.to_config(p), p) for p in space.grid()]
    verdicts: dict[tuple, bool] = {}
    for role, c, params_ in configs:
        key = c.key()
        if key in land.rows:
            continue
        # Only these knobs decide feasibility here (every library is found, the space's one rule
        # reads threads and nproc, and the global batch must split over the ranks): asking the
        # real ruled_out once per layout is enough.
        lay = (c.nproc, c.ranks_per_numa_node, c.threads, c.binding, c.backend, c.precision, c.ipex,
               c.global_batch, c.mem_policy)
        if lay not in verdicts:
            verdicts[lay] = bool(ruled_out(c, space, topology))
        if verdicts[lay]:
            land.rows[key] = _INFEASIBLE
            continue
        thr = throughput(c, topology, hw, params)
        land.rows[key] = {"config": c.to_dict(), "role": role, "outcome": Outcome.OK, "throughput": thr,
                          "seconds": round(trial_seconds(c, thr, params, window_s), 3)}
        k = math_key(c)
        if k not in land.accuracy:
            # accuracy runs train 4096 samples on the fastest config with that math (~)
            land.accuracy[k] = {"outcome": Outcome.OK, "accuracy": accuracy(c.global_batch_size, c.precision),
                                "seconds": round(params.startup_s + 4096 / thr + 2.0, 3)}
    return land


def extended_optimum(topology: Topology, hw: Hardware, params: Params, land: Landscape,
                     max_drop: float = 1.0) -> tuple[float, Config | None]:
    """The model's best launch over layouts the space does not list: any ranks per node and any
    thread count a rank's cores allow (auto included), the space's other choices. Tells whether
    the space's grid holds the optimum."""
    space = land.space()
    k = space.knobs
    node_sizes = [sum(1 for c in topology.usable_cores() if c.node == n.id)
                  for n in topology.compute_nodes()] or [len(topology.usable_cores())]
    nodes = max(1, len(node_sizes))
    base_acc = accuracy(Config().global_batch_size, "fp32")
    best, where = 0.0, None
    for npn in range(1, max(node_sizes) + 1):
        for threads in [None] + list(range(1, 2 * max(node_sizes) // npn + 1)):
            for binding in k["binding"]:
                for backend in k["backend"]:
                    c = Config(nproc=npn * nodes, ranks_per_numa_node=npn, threads=threads,
                               binding=binding, backend=backend, allocator=k["allocator"][-1],
                               omp_runtime=k["omp_runtime"][-1])
                    # whether the ranks can split the global batch depends on the batch: asked
                    # per batch, as model_landscape's feasibility cache is keyed
                    splits = [b for b in k["global_batch"]
                              if not ruled_out(c.with_(global_batch=b), None, topology)]
                    for precision in k["precision"]:
                        for batch in splits:
                            cc = c.with_(precision=precision, global_batch=batch)
                            if (base_acc - accuracy(cc.global_batch_size, precision)) * 100 > max_drop:
                                continue
                            for alloc in k["allocator"]:
                                for omp in k["omp_runtime"]:
                                    c3 = cc.with_(allocator=alloc, omp_runtime=omp)
                                    for c4 in _placed(c3, k, topology):
                                        thr = throughput(c4, topology, hw, params)
                                        if thr > best:
                                            best, where = thr, c4
    return best, where


def _placed(config: Config, knobs: dict, topology: Topology) -> list[Config]:
    """`config` under each memory policy the space offers that can place its ranks here."""
    return [config] + [c for c in (config.with_(mem_policy=p)
                                   for p in knobs.get("mem_policy", ())[1:])
                       if not ruled_out(c, None, topology)]


# -- calibration on this machine's recorded landscape ---------------------------------------------

CALIBRATION_HW = Hardware(name="calibration", node_bandwidth_gbs=20.0, vcpus_share_cores=True,
                          note="2 vCPUs of a cloud EPYC VM (family 26; family 25 before), taken as SMT siblings")


def fit_report(land: Landscape, params: Params, hw: Hardware = CALIBRATION_HW) -> dict[str, Any]:
    topology = land.topology()
    pairs = []
    for row in land.rows.values():
        if row["outcome"] == Outcome.OK and row.get("throughput"):
            c = Config.from_dict(row["config"])
            pairs.append((math.log(row["throughput"]), math.log(throughput(c, topology, hw, params))))
    ys = [y for y, _ in pairs]
    mean = statistics.fmean(ys)
    ss_res = sum((y - f) ** 2 for y, f in pairs)
    ss_tot = sum((y - mean) ** 2 for y in ys)
    errs = sorted(abs(y - f) for y, f in pairs)
    return {"configs": len(pairs), "r2_log": 1 - ss_res / ss_tot if ss_tot else 0.0,
            "median_abs_log_error": statistics.median(errs),
            "median_abs_pct_error": (math.exp(statistics.median(errs)) - 1) * 100}


# The values calibrate() tries for each parameter the 2-core machines identify (two_machines.py
# picks from them, and adds its own, for a machine that identifies more).
CALIBRATION_GRIDS = {"sample_s": [x * 1e-4 for x in range(3, 30)],
                     "fixed_s": [x * 5e-4 for x in range(0, 40)],
                     "bf16_gain": [1 + x / 20 for x in range(0, 25)],
                     "sibling_gain": [x / 20 for x in range(0, 21)],
                     "libiomp5": [0.9 + x / 100 for x in range(0, 21)],
                     "taskset": [0.9 + x / 100 for x in range(0, 31)],
                     "numactl": [0.9 + x / 100 for x in range(0, 31)]}
ALLOCATOR_GRID = [1 + x / 50 for x in range(0, 26)]


def calibrate(land: Landscape, params: Params = Params(), rounds: int = 3,
              hw: Hardware = CALIBRATION_HW, grids: dict[str, list[float]] | None = None,
              allocators: tuple[str, ...] = ("jemalloc", "tcmalloc")) -> Params:
    """Coordinate search on the parameters this machine can identify, minimising the squared
    error of log throughput over its recorded configs (the machine's `hw`; `grids` and
    `allocators`: which parameters, default the 2-core machines')."""
    grids = CALIBRATION_GRIDS if grids is None else grids
    alloc = {a: ALLOCATOR_GRID for a in allocators}

    def loss(p: Params) -> float:
        r = fit_report(land, p, hw)
        return (1 - r["r2_log"])
    best = params
    for _ in range(rounds):
        for name, values in grids.items():
            best = min((dataclasses.replace(best, **{name: v}) for v in values), key=loss)
        for name, values in alloc.items():
            def set_alloc(v: float) -> Params:
                d = dict(best.allocator)
                d[name] = v
                return dataclasses.replace(best, allocator=tuple(d.items()))
            best = min((set_alloc(v) for v in values), key=loss)
    return best


def published_shapes(params: Params, global_batch: int = 256) -> dict[str, Any]:
    """The book's comparison on a 2-socket Xeon, at equal math: one process on every core (the
    default launch) with the whole global batch, against the best gloo / oneCCL launch of N
    bound ranks sharing that global batch; and oneCCL with the global batch doubled (the
    "little accuracy loss": 1 pp in this model's accuracy rule)."""
    topo, hw = machines()["xeon-2s-icx"]
    base = throughput(Config(global_batch=global_batch), topo, hw, params)
    out: dict[str, Any] = {"machine": "xeon-2s-icx", "global_batch": global_batch,
                           "one_process_samples_s": round(base, 1)}
    for label, backend, gb in (("gloo", "gloo", global_batch), ("ccl", "ccl", global_batch),
                               ("ccl_double_batch", "ccl", 2 * global_batch)):
        best, where = 0.0, None
        for npn in range(1, 33):
            if gb % (2 * npn):
                continue
            c = Config(nproc=2 * npn, ranks_per_numa_node=npn, binding="numactl", backend=backend,
                       allocator="default", global_batch=gb)
            if ruled_out(c, None, topo):
                continue
            thr = throughput(c, topo, hw, params)
            if thr > best:
                best, where = thr, c
        out[label] = {"ratio": round(best / base, 3), "ranks": where.nproc if where else None,
                      "accuracy_drop_pp": round((accuracy(global_batch, "fp32")
                                                 - accuracy(gb, "fp32")) * 100, 2)}
    return out


__all__ = ["machines", "capture_machine", "model_landscape", "extended_optimum", "calibrate", "fit_report",
           "published_shapes", "step_seconds"]
