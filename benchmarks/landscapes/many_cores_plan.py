"""Which configurations a time-boxed landscape of a many-core machine measures, and what they
cost (benchmarks/landscapes/many_cores.py records them; issue 45). Pure: a topology and a space in, a plan
out, no trial run.

The configurations are those that teach the landscape model most, in blocks by priority:
  anchors   run_cpu's settings, and on one rank per node what each of them does alone: the
            binding, the allocator, the OpenMP runtime (the model gave them 10% at 16 threads;
            measured, 40-84%)
  layouts   ranks x threads: 2, 4, 8 ... ranks per node dividing its cores, up to one rank per
            core, each with the node's cores shared out, gloo (16 single-thread gloo ranks ran
            at 0.43x, the model said 0.93x)
  ccl       the same layouts at 2, 4 and 8 ranks over oneCCL (never measured beyond 2 cores)
  math      bf16 and global batch 64 and 128 on one rank
  amortise  batch 128 on a middle layout over gloo and ccl (a larger batch amortises the
            all-reduce the layouts pay)
  more      jemalloc, unbound threads, half the cores, bf16 on two ranks
Each block is measured as D c1 .. ck ck .. c1 (D: the default launch), so every configuration
gets two windows far apart in time and the default launch is measured again in every block:
a drift of the machine shows in D's windows. Blocks are taken in priority order while their
estimated time (the landscape model's trial cost, model.trial_seconds) fits the budget
beside the seeded quality runs of every math class the taken blocks measure; one that does not
fit is dropped and a smaller one after it may still be taken. While recording, a math class's
quality runs come just before the first block that measures it, and a block whose estimate
(its quality runs included), scaled by how much longer the launches so far took, no longer
fits is skipped with them.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from autotune.config import Config
from autotune.plan.feasible import ruled_out
from autotune.search.references import reference_configs
from autotune.space.resolve import ResolvedSpace
from autotune.probe.topology import Topology
from autotune.training import QUALITY_SAMPLES

from .table import math_key
from .model import Hardware, Params, throughput, trial_seconds

# A ccl rank's init_process_group takes 0.7-1.5 s more than gloo's (docs/backends.md).
CCL_STARTUP_S = 1.0
# What a launch costs there beyond the model's trial time (start-up fitted on 2 cores with a
# CPU torch): the GPU machine's trials took 10-11 s at 5 s windows and its quality runs 11-19 s,
# about 3 s more each than the model says. Its torch is a CUDA build, which every rank imports
# with CUDA's libraries.
CUDA_TORCH_EXTRA_S = 3.0
BLOCKS = ("anchors", "layouts", "ccl", "math", "amortise", "more")
# What a quality run costs beyond its training samples: start-up and the held-out evaluation.
QUALITY_OVERHEAD_S = 5.0


@dataclasses.dataclass(frozen=True)
class Planned:
    role: str                        # "grid", or a reference's role
    config: Config
    params: dict[str, Any] | None    # the space's grid point (None for a reference)
    estimate_s: float                # one window's launch, by the model
    ruled_out: str | None = None     # recorded as infeasible, never launched


@dataclasses.dataclass(frozen=True)
class Block:
    name: str
    configs: tuple[Planned, ...]

    def launches(self) -> list[Planned]:
        """D, each config, then each again in reverse order (launched ones only)."""
        run = [p for p in self.configs if p.ruled_out is None]
        return run + run[::-1]

    def estimate_s(self, default: Planned) -> float:
        launches = self.launches()
        return default.estimate_s + sum(p.estimate_s for p in launches) if launches else 0.0


@dataclasses.dataclass(frozen=True)
class Plan:
    default: Planned
    blocks: tuple[Block, ...]          # kept, in the order they run
    dropped: tuple[Block, ...]         # did not fit the budget
    quality: tuple[tuple[str, Config, float], ...]   # (math class, config, one run's estimate)
    seeds: int
    budget_s: float

    def estimate_s(self) -> float:
        return (sum(b.estimate_s(self.default) for b in self.blocks) + self.default.estimate_s
                + self.seeds * sum(q[2] for q in self.quality))

    def text(self) -> str:
        lines = [f"budget {self.budget_s:.0f}s, estimated {self.estimate_s():.0f}s "
                 f"(the landscape model's trial costs for this machine)",
                 f"quality: {len(self.quality)} math classes x {self.seeds} seeds: "
                 + ", ".join(f"{k} (~{s:.0f}s a run)" for k, _, s in self.quality)]
        for kept, blocks in (("block", self.blocks), ("dropped", self.dropped)):
            for b in blocks:
                lines.append(f"{kept} {b.name} (~{b.estimate_s(self.default):.0f}s): D, then "
                             "each twice, reversed the second time")
                lines += [f"    {_short(p.config)}  ~{p.estimate_s:.1f}s"
                          + (f"  [ruled out: {p.ruled_out}]" if p.ruled_out else "")
                          for p in b.configs]
        lines.append(f"then D once more (~{self.default.estimate_s:.1f}s)")
        return "\n".join(lines)


def _short(c: Config) -> str:
    from autotune.config import describe_changes
    return describe_changes(c)


def candidate_blocks(space: ResolvedSpace, topology: Topology) -> list[tuple[str, list]]:
    """(name, [(role, params or Config)]) by priority; duplicates and foreign values removed."""
    k, names = space.knobs, space.topology_names
    cores = int(names.get("cores_per_node") or 1)

    def pick(knob: str, *prefer: Any) -> Any:
        return next((v for v in prefer if v in k.get(knob, ())), k[knob][0] if knob in k else None)
    first = {name: values[0] for name, values in k.items()}
    tuned = {**first, "binding": pick("binding", "numactl", "taskset", "none"),
             "allocator": pick("allocator", "tcmalloc", "jemalloc", "default"),
             "omp_runtime": pick("omp_runtime", "libiomp5", "libgomp")}

    def lay(ranks: int, **over: Any) -> dict[str, Any]:
        threads = over.pop("threads", cores // ranks)
        return {**tuned, "ranks_per_numa_node": ranks, "threads": threads, **over}
    ranks = [r for r in (2 ** i for i in range(1, 12)) if r <= cores and cores % r == 0]
    middle = ranks[len(ranks) // 2 - 1] if len(ranks) > 1 else (ranks[0] if ranks else 1)
    run_cpu = dict(reference_configs(topology, Config()))["reference:run_cpu"]
    blocks = [
        ("anchors", [("reference:run_cpu", run_cpu), lay(1, allocator="default", omp_runtime="libgomp"),
                     lay(1, omp_runtime="libgomp"), lay(1, allocator="default")]),
        ("layouts", [lay(r) for r in ranks]),
        ("ccl", [lay(r, backend="ccl") for r in ranks[:3]]),
        ("math", [lay(1, precision="bf16"), lay(1, global_batch=64), lay(1, global_batch=128)]),
        ("amortise", [lay(middle, global_batch=128), lay(middle, global_batch=128, backend="ccl")]),
        ("more", [lay(1, allocator="jemalloc"), lay(1, binding="none"),
                  lay(1, threads=max(1, cores // 2)), lay(min(2, cores), precision="bf16")]),
    ]
    out, seen = [], set()
    for name, items in blocks:
        kept = []
        for item in items:
            role, value = item if isinstance(item, tuple) else ("grid", item)
            if role == "grid" and any(value.get(n) not in k[n] for n in k if n in value):
                continue          # a value this machine's space does not offer (no bf16, no ccl)
            config = value if isinstance(value, Config) else space.to_config(value)
            if config.key() not in seen:
                seen.add(config.key())
                kept.append((role, value))
        if kept:
            out.append((name, kept))
    return out


def make_plan(space: ResolvedSpace, topology: Topology, *, budget_s: float, window_s: float,
              seeds: int, quality_samples: int = QUALITY_SAMPLES,
              hardware: Hardware | None = None, params: Params = Params(),
              launch_extra_s: float = 0.0, only: tuple[str, ...] | None = None) -> Plan:
    """The blocks that fit `budget_s` beside their math classes' quality runs. `launch_extra_s`:
    what each launch costs beyond the model here (CUDA_TORCH_EXTRA_S with a CUDA build);
    `only`: the blocks to consider (default all, BLOCKS)."""
    hw = hardware or Hardware(name="here", node_bandwidth_gbs=100.0)

    def planned(role: str, value) -> Planned:
        config = value if isinstance(value, Config) else space.to_config(value)
        why = ruled_out(config, space if role == "grid" else None, topology)
        est = trial_seconds(config, throughput(config, topology, hw, params), params, window_s)
        est += launch_extra_s + (CCL_STARTUP_S if config.backend == "ccl" else 0.0)
        return Planned(role, config, value if role == "grid" else None, est, why)

    def quality_run(config: Config) -> float:
        return (QUALITY_OVERHEAD_S + launch_extra_s
                + quality_samples / throughput(config, topology, hw, params))
    default = planned("reference:default", Config())
    # The default math's quality (the gate's baseline) on the first config with that math,
    # run_cpu's: one rank like the default launch, and far faster where cores are shared.
    classes: dict[str, tuple[Config, float]] = {}
    kept, dropped, spent = [], [], default.estimate_s
    for name, items in candidate_blocks(space, topology):
        if only is not None and name not in only:
            continue
        block = Block(name, tuple(planned(role, v) for role, v in items))
        wanted = dict(classes)
        # a class's quality on its first config of one rank a node, as the default launch's
        for p in sorted(block.configs, key=lambda p: p.config.nproc):
            if p.ruled_out is None and math_key(p.config) not in wanted:
                wanted[math_key(p.config)] = (p.config, quality_run(p.config))
        quality = seeds * sum(s for _, s in wanted.values())
        if spent + block.estimate_s(default) + quality <= budget_s:
            kept.append(block)
            spent += block.estimate_s(default)
            classes = wanted
        else:
            dropped.append(block)
    classes.setdefault(math_key(default.config), (default.config, quality_run(default.config)))
    return Plan(default=default, blocks=tuple(kept), dropped=tuple(dropped),
                quality=tuple((k, c, s) for k, (c, s) in classes.items()), seeds=seeds,
                budget_s=budget_s)
