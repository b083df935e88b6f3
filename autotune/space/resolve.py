"""Search spaces: which launch configurations a study may try, relative to the probed machine.

A YAML file (format: search_spaces/README.md) names knobs and candidate values, literally or as
expressions over the topology (`divisors(usable_cores)`), plus constraints the planner cannot
know. `load_space` checks the file without a machine, so `--space` typos fail at once;
`resolve` turns it into concrete choices for one Topology, dropping what this machine cannot
run and saying why in `notes`.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import expr as _expr
from .spec import (DEFAULT_CONSTRAINTS, TOPOLOGY_INTS, Item, KnobSpec, Rule, SpaceSpec,
                          check_value, load_space, parse_space)
from ..config import (ALLOCATORS, BACKENDS, BINDINGS, CCL_WORKER_AFFINITIES, KNOB_TABLE,
                      PRECISIONS, Config)
from ..errors import ConfigError, SpaceError
from ..plan.gpu import gpu_node
from ..plan.feasible import compile_problem, cpu_precision, precision_problem
from ..plan.memory import offered as offered_mem_policies, policy_unavailable
from ..probe.topology import Topology

__all__ = ["DEFAULT_CONSTRAINTS", "ResolvedSpace", "SpaceSpec", "default_space_path", "find_space",
           "load_space", "parse_space", "resolve", "spaces_dir", "topology_names"]

_INSTALL = {"jemalloc": "apt-get install libjemalloc2", "tcmalloc": "apt-get install libgoogle-perftools4",
            "libiomp5": "pip install intel-openmp"}
_FEASIBILITY_CHECK_LIMIT = 20_000  # grids up to this size are checked for "nothing is feasible"
# The one copy of the built-in spaces (package data); the checkout's search_spaces/ links here.
_BUILTIN_SPACES = Path(__file__).resolve().parent / "builtin"


@dataclass(frozen=True, kw_only=True)
class ResolvedSpace:
    """Concrete choices for one machine; knobs keep the file's order (grid order)."""
    name: str
    source: str
    knobs: dict[str, tuple[Any, ...]]
    fixed: dict[str, Any]
    constraints: tuple[str, ...]
    notes: tuple[str, ...]
    topology_names: dict[str, int]
    rules: tuple[Rule, ...] = field(default=(), repr=False, compare=False)
    addresses: dict[str, tuple[str, ...]] = field(default_factory=dict)  # as the file says

    def size(self) -> int:
        return math.prod(len(v) for v in self.knobs.values())

    def across(self, num_hosts: int) -> "ResolvedSpace":
        """The space with `nnodes` (1..num_hosts) as its first knob: spanning hosts is tried."""
        if num_hosts < 2 or "nnodes" in self.knobs:
            return self
        from dataclasses import replace
        return replace(self, knobs={"nnodes": tuple(range(1, num_hosts + 1)), **self.knobs},
                       notes=self.notes + (f"nnodes: 1..{num_hosts} hosts",))

    def grid(self) -> Iterator[dict[str, Any]]:
        """Every combination; the first knob varies slowest, the last fastest."""
        names = tuple(self.knobs)
        for combo in itertools.product(*self.knobs.values()):
            yield dict(zip(names, combo))

    def to_config(self, params: Mapping[str, Any]) -> Config:
        merged = {**self.fixed, **params}
        # ranks_per_numa_node counts ranks per NUMA node, so the world size follows from the machine.
        if "nproc" not in merged and merged.get("ranks_per_numa_node") is not None:
            merged["nproc"] = (merged["ranks_per_numa_node"] * self.topology_names["numa_nodes"]
                               * int(merged.get("nnodes", 1)))
        return Config.from_dict(merged, where=f"{self.source}: params")

    def violations(self, params: Mapping[str, Any]) -> list[str]:
        """Constraints (and Config rules) that `params` breaks; empty when it may run."""
        try:
            cfg = self.to_config(params)
        except ConfigError as exc:
            return [str(exc)]
        env = {**self.topology_names, **cfg.to_dict(), "global_batch_size": cfg.global_batch_size}
        # The machine names (usable_cores, ...) describe one host, so rules count its ranks.
        env["nproc"] = cfg.nproc // cfg.nnodes
        broken = []
        for rule in self.rules:
            if any(env[n] is None for n in rule.names):
                continue  # threads=auto: torch picks, so the rule cannot judge it
            try:
                if not _expr.evaluate(rule.node, env):
                    broken.append(rule.text)
            except _expr.ExprError as exc:
                broken.append(f"{rule.text} ({exc})")
        return broken

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "fixed": dict(self.fixed),
                "knobs": {k: list(v) for k, v in self.knobs.items()},
                "constraints": list(self.constraints), "notes": list(self.notes),
                "topology_names": dict(self.topology_names), "size": self.size()}


def topology_names(topology: Topology) -> dict[str, Any]:
    """Values of the names expressions may use (TOPOLOGY_INTS and TOPOLOGY_LISTS)."""
    cores = topology.usable_cores()
    usable = topology.num_usable_cores()
    per_node = [sum(1 for c in cores if c.node == n.id) for n in topology.compute_nodes()]
    smt = max((len(c.cpus) for c in cores), default=1)
    caps, gpus = topology.capabilities, len(topology.gpus)
    bindings = {"none": True, "taskset": caps.taskset, "taskset_smt": caps.taskset and smt > 1,
                "numactl": caps.numactl, "numactl_smt": caps.numactl and smt > 1}
    # torch ships and loads libgomp itself, so it is always there; Intel OpenMP must be found.
    omp = ("libgomp",) + (("libiomp5",) if caps.omp_runtimes.get("libiomp5") else ())
    return {
        "usable_cores": usable,
        # the smallest node bounds "processes per node"; a CPU quota can bound it further
        "cores_per_node": min(min(per_node, default=usable), usable),
        "numa_nodes": max(1, len(per_node)),
        "logical_cpus": sum(len(c.cpus) for c in cores),
        "smt": smt,
        "gpus": gpus,
        "found_allocators": ("default",) + tuple(a for a in ALLOCATORS[1:] if caps.allocators.get(a)),
        "found_backends": tuple(b for b in BACKENDS if b in caps.backends),
        "found_omp_runtimes": omp,
        # what this CPU computes natively; a GPU space lists its precisions itself
        "supported_precisions": tuple(p for p in PRECISIONS
                                      if cpu_precision(p, topology) == "native"),
        "found_bindings": tuple(b for b in BINDINGS if bindings[b]),
        # the probe sets ipex_version only when IPEX imports and was built for this torch
        "found_ipex": ("off",) + (("on",) if caps.ipex_version else ()),
        # oneCCL's knobs vary only where the ccl backend is usable; elsewhere each is its default,
        # so a machine without ccl searches the same space as before it existed
        **_ccl_names("ccl" in caps.backends),
        # local everywhere; interleave, preferred_fast and weighted where the probe found the
        # nodes and the tools for them (plan/memory.py). `local` alone: the knob is not offered.
        "found_mem_policies": offered_mem_policies(topology),
    }


def _ccl_names(ccl: bool) -> dict[str, Any]:
    """Workers 1-2 (a second helps large all-reduces, costs a core), shared or dedicated cores,
    and the two wait modes Intel's guides tune (pause only pays off on dedicated cores)."""
    if not ccl:
        return {"ccl_worker_max": 1, "ccl_affinities": ("shared",), "ccl_yields": ("sched_yield",)}
    return {"ccl_worker_max": 2, "ccl_affinities": CCL_WORKER_AFFINITIES,
            "ccl_yields": ("sched_yield", "pause")}


def _unavailable(knob: str, value: Any, topology: Topology, names: Mapping[str, Any]) -> str | None:
    """Why `value` cannot run on this machine, or None when it can."""
    caps = topology.capabilities
    if knob == "allocator" and value not in names["found_allocators"]:
        return f"{value} not found ({_INSTALL.get(value, 'not installed')})"
    if knob == "omp_runtime" and value not in names["found_omp_runtimes"]:
        return f"Intel OpenMP ({value}) not found ({_INSTALL['libiomp5']})"
    if knob == "backend" and value not in caps.backends:
        return {"ccl": caps.ccl_problem or "the ccl backend is not set up (python -m autotune.comm.ccl build)",
                "nccl": "needs NVIDIA GPUs and a CUDA build of torch",
                "mpi": "this torch was built without MPI"}.get(value, f"{value} backend not available")
    if knob == "binding" and value not in names["found_bindings"]:
        tool = value.split("_")[0]
        if tool == "numactl" and not caps.numactl:
            return "numactl not usable here (apt-get install numactl; containers may forbid it)"
        if tool == "taskset" and not caps.taskset:
            return "taskset not usable here (apt-get install util-linux)"
        return "no SMT siblings among the usable CPUs"
    if knob == "ipex" and value == "on" and not caps.ipex_version:
        return caps.ipex_problem or "IPEX not importable (pip install intel-extension-for-pytorch)"
    if knob == "device" and value == "cuda" and not (topology.gpus and caps.cuda):
        return ("no NVIDIA GPU found (nvidia-smi)" if not topology.gpus
                else "this torch cannot use CUDA (a CPU-only build, or no driver)")
    if knob == "numa_binding" and value == "core-complex" and not topology.l3_domains:
        return "the probe found no L3 cache groups (cpu*/cache/index3/shared_cpu_list)"
    if knob == "numa_binding" and value != "none" and \
            any(gpu_node(g, topology) is None for g in topology.gpus):
        return "nvidia-smi gives no NUMA node for some GPU, so no CPUs are known to be near it"
    if knob == "mem_policy":
        return policy_unavailable(value, topology)
    if knob == "compile" and value:
        return compile_problem("cuda" if topology.gpus else "cpu", topology)
    return None


def _cpu_precision_note(precision: str, topology: Topology) -> list[str]:
    """What a kept precision means for CPU trials, by the planner's rule (plan.feasible)."""
    how = cpu_precision(precision, topology)
    if how == "emulated":
        return [f"precision={precision} kept: this CPU has no native {precision} math, so CPU "
                f"trials emulate it, usually slower than fp32"]
    if how == "unsupported":   # kept for the GPU trials only
        return [f"precision={precision} kept for cuda trials only: "
                f"{precision_problem(precision, 'cpu', topology)}, so CPU trials with it are "
                "ruled out"]
    return []


def resolve(spec: SpaceSpec, topology: Topology, *, pipeline: bool = False) -> ResolvedSpace:
    """`spec`'s choices on `topology`. `pipeline`: the workload's CPU trials batch through a
    pipeline of their own (an entry point, a built-in workload given a per-sample cost, a script
    with the placeholder); without it a knob of the pipeline (config.Knob.needs_pipeline) is
    left out of a CPU space, as the built-in workloads make their batches in the rank. GPU
    trials always batch through one."""
    names = topology_names(topology)
    notes: list[str] = []
    knobs: dict[str, tuple[Any, ...]] = {}
    devices = (set(_expand("device", spec.knobs["device"].choices, names))
               if "device" in spec.knobs else {spec.fixed.get("device", "cpu")})
    for knob, ks in spec.knobs.items():
        excluded = set(_expand(knob, ks.exclude, names))
        kept: list[Any] = []
        dropped: list[str] = []
        seen: list[Any] = []  # a list: True == 1 would merge in a set, though coerce keeps types apart
        for value in _expand(knob, ks.choices, names):
            if value in excluded or value in seen:
                continue
            seen.append(value)
            why = _unavailable(knob, value, topology, names)
            if knob == "precision" and not why:
                # the planner's rule, so the space never offers what a trial would rule out
                problems = [precision_problem(value, d, topology) for d in sorted(devices)]
                why = problems[0] if all(problems) else None
            if why:
                dropped.append(f"{knob}={_fmt(value)} dropped: {why}")
                continue
            if knob == "precision" and "cpu" in devices:
                notes.extend(_cpu_precision_note(value, topology))
            kept.append(value)
        notes.extend(dropped)
        if not kept:
            why = "; ".join(dropped) if dropped else _why_empty(ks, names, excluded)
            raise SpaceError(f"{ks.where}: no choice is left on this machine ({why})")
        if KNOB_TABLE[knob].only_where_it_varies and kept == [getattr(Config(), knob)]:
            continue   # not offered here: the space is the one searched before the knob
        if KNOB_TABLE[knob].needs_pipeline and not (pipeline or "cuda" in devices):
            continue   # batches made in the rank: nothing for it to act on
        knobs[knob] = tuple(kept)
    for knob, value in spec.fixed.items():
        why = _unavailable(knob, value, topology, names)
        if why:
            raise SpaceError(f"{spec.source}: fixed.{knob}: {_fmt(value)} cannot run here: {why}")
    space = ResolvedSpace(
        name=spec.name, source=spec.source, knobs=knobs, fixed=dict(spec.fixed),
        constraints=tuple(r.text for r in spec.constraints), notes=tuple(notes),
        topology_names={n: names[n] for n in TOPOLOGY_INTS}, rules=spec.constraints,
        addresses={k: v.addresses for k, v in spec.knobs.items() if v.addresses is not None})
    if spec.constraints and space.size() <= _FEASIBILITY_CHECK_LIMIT \
            and not any(not space.violations(p) for p in space.grid()):
        raise SpaceError(f"{spec.source}: constraints: no combination of the choices satisfies "
                         f"them on this machine ({'; '.join(space.constraints)})")
    return space


def _expand(knob: str, items: tuple[Item, ...], names: Mapping[str, Any]) -> Iterator[Any]:
    for item in items:
        if item.expr is None:
            yield item.value
            continue
        try:
            result = _expr.evaluate(item.expr, names)
        except _expr.ExprError as exc:
            raise SpaceError(f"{item.where}: {exc}") from None
        for value in result if isinstance(result, tuple) else (result,):
            yield check_value(knob, value, f"{item.where}: {item.text!r} gives {value!r}")


def _why_empty(ks: KnobSpec, names: Mapping[str, Any], excluded: set) -> str:
    if excluded:
        return f"every value is excluded ({', '.join(sorted(map(_fmt, excluded)))})"
    return "; ".join(f"{i.text!r} gives no values with "
                     + ", ".join(f"{n}={names[n]}" for n in sorted(_expr.names_in(i.expr)))
                     for i in ks.choices if i.expr is not None)


def _fmt(value: Any) -> str:
    if value is None:
        return "auto"
    return str(value).lower() if isinstance(value, bool) else str(value)


def spaces_dir() -> Path:
    """The built-in spaces, shipped as package data (one copy)."""
    if (_BUILTIN_SPACES / "cpu.yaml").is_file():
        return _BUILTIN_SPACES
    raise SpaceError(f"built-in search spaces not found in {_BUILTIN_SPACES}; reinstall autotune")


def default_space_path(topology: Topology) -> Path:
    gpu = topology.gpus and topology.capabilities.cuda  # GPUs that this torch can train on
    return spaces_dir() / ("gpu.yaml" if gpu else "cpu.yaml")


def find_space(name: str | Path) -> Path:
    """`--space` argument: a file path, or the name of a built-in space (`cpu`, `gpu`)."""
    path = Path(name)
    if path.is_file():
        return path
    builtin = spaces_dir() / (path.name if path.suffix == ".yaml" else f"{path.name}.yaml")
    if path.parent == Path(".") and builtin.is_file():
        return builtin
    known = ", ".join(sorted(p.stem for p in spaces_dir().glob("*.yaml")))
    raise SpaceError(f"{name}: search-space file not found (built-in spaces: {known})")
