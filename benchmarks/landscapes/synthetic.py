"""Synthetic landscapes: the CPU space on the captured 2-core EPYC, every configuration answered
by a formula or by random effects. Known answers, any machine, milliseconds: what the tests and
the replay's smoke test search (`python3 -m benchmarks.landscapes.record --synthetic formula
--out FILE` writes one)."""
from __future__ import annotations

import dataclasses
import math
import random

from autotune.result import Outcome
from autotune.config import Config
from autotune.plan.feasible import ruled_out
from autotune.search.references import reference_configs
from autotune.space.resolve import find_space, load_space, resolve
from autotune.probe.topology import Capabilities, Topology

from benchmarks import ROOT

from .table import SCHEMA, Landscape, _row, math_key

FIXTURE = ROOT / "tests" / "fixtures" / "machines" / "live-epyc-2cpu"


def fixture_topology() -> Topology:
    """The captured 2-core EPYC with every library found (as on the machine these ran on)."""
    from autotune.probe import probe
    t = probe(str(FIXTURE), collect_capabilities=False)
    caps = Capabilities(allocators={"jemalloc": "/lib/libjemalloc.so.2",
                                    "tcmalloc": "/lib/libtcmalloc.so.4"},
                        omp_runtimes={"libgomp": None, "libiomp5": "/lib/libiomp5.so"},
                        backends=("gloo",), numactl=True, numactl_membind=True, taskset=True)
    return dataclasses.replace(t, capabilities=caps)


def _speed_formula(c: Config, rng: random.Random) -> float:
    """A plausible 2-core CNN: bf16 helps a lot, 2x1 beats 1x2 a little, 1 thread alone is slow."""
    threads = c.threads or 2 // c.nproc or 1
    s = 100.0 * (1.55 if c.precision == "bf16" else 1.0)
    s *= {(1, 1): 0.55, (1, 2): 1.0, (2, 1): 1.12}.get((c.nproc, threads), 0.5)
    s *= {"default": 1.0, "jemalloc": 1.03, "tcmalloc": 1.05}[c.allocator]
    s *= 0.96 if c.omp_runtime == "libiomp5" else 1.0
    s *= {"none": 1.0, "taskset": 1.02, "numactl": 1.025}.get(c.binding, 1.0)
    s *= 1.10 if c.batch_size == 64 else 1.0
    if c.precision == "bf16" and c.nproc == 2:
        s *= 0.93  # smaller per-rank GEMMs gain less from bf16
    return s * math.exp(rng.gauss(0.0, 0.02))


def _speed_random(c: Config, rng: random.Random, effects: dict) -> float:
    """Random main effects and pairwise interactions: nothing a hand-made heuristic can know."""
    d = c.to_dict()
    names = ("nproc", "threads", "binding", "allocator", "omp_runtime", "precision", "batch_size")
    s = 100.0
    for n in names:
        s *= effects.setdefault((n, d[n]), math.exp(effects["_rng"].gauss(0.0, 0.15)))
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            s *= effects.setdefault((a, d[a], b, d[b]), math.exp(effects["_rng"].gauss(0.0, 0.05)))
    return s * math.exp(rng.gauss(0.0, 0.02))


def synthetic(kind: str = "formula", seed: int = 0, seconds: float = 5.0) -> Landscape:
    """A complete landscape of the CPU space on the fixture machine, from a formula or from
    random effects; accuracy falls with global batch and a little with bf16."""
    topology = fixture_topology()
    space = resolve(load_space(find_space("cpu")), topology)
    rng = random.Random(seed)
    effects: dict = {"_rng": random.Random(seed + 1000)}
    land = Landscape({"schema": SCHEMA, "fingerprint": f"synthetic-{kind}-{seed}",
                      "topology": topology.to_json(), "space": space.to_json(),
                      "library_versions": {}, "workload": f"synthetic:{kind}",
                      "target_seconds": seconds, "rows": {}, "accuracy": {}, "synthetic": True})
    configs = [(role, c, None) for role, c in reference_configs(topology, Config())]
    configs += [("grid", space.to_config(p), p) for p in space.grid()]
    for role, c, params in configs:
        reason = ruled_out(c, space, topology)
        if reason:
            land.rows[c.key()] = _row(c, role, params, outcome=Outcome.INFEASIBLE, reason=reason,
                                      seconds=0.0, throughput=None)
            continue
        speed = _speed_formula(c, rng) if kind == "formula" else _speed_random(c, rng, effects)
        land.rows[c.key()] = _row(c, role, params, outcome=Outcome.OK, throughput=speed,
                                  seconds=round(seconds + 4.0 + rng.uniform(0, 1.5), 3))
        k = math_key(c)
        if k not in land.accuracy:
            acc = 0.80 - 0.0001 * c.global_batch_size - (0.002 if c.precision == "bf16" else 0.0)
            land.accuracy[k] = {"outcome": Outcome.OK, "accuracy": acc, "seconds": 20.0,
                                "config": c.to_dict()}
    return land
