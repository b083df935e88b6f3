"""What a search starts from: the sampler, its first draws, the default launch and the launcher
heuristic (torch's run_cpu on CPUs, torchrun's NUMA binding on GPUs) measured as references, and,
where the space offers torch.compile, the default launch compiled."""
from __future__ import annotations

import random
import warnings
from typing import Any, Callable

import optuna

from ..config import Config
from ..probe.topology import Topology
from ..study.records import Role


# TPE's random start-up draws; the search makes them itself, from launchable configurations.
STARTUP_TRIALS = 6


SAMPLERS = ("tpe", "gp")


def make_sampler(seed: int = 0, kind: str = "tpe") -> optuna.samplers.BaseSampler:
    """kind "gp": Optuna's Gaussian-process sampler with the trials' constraints, a candidate
    the simulator compared and rejected (docs/search-at-scale.md: the references carry no
    parameters, so its joint search space is empty and it samples at random); "tpe" is the
    search's."""
    if kind not in SAMPLERS:
        raise ValueError(f"sampler {kind!r}: choose one of {', '.join(SAMPLERS)}")
    if kind == "gp":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            # Optuna 5 reads the constraints the search sets on each trial (set_constraint)
            return optuna.samplers.GPSampler(seed=seed, n_startup_trials=STARTUP_TRIALS,
                                             warn_independent_sampling=False)
    # Multivariate TPE models knob interactions (threads x nproc, allocator x precision) that an
    # independent sampler misses; a short random start keeps the first trials diverse. group=True
    # because the reference trials carry no parameters (their configs need not lie in the space)
    # and would otherwise empty the joint search space, silently making TPE independent.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True,
                                          n_startup_trials=STARTUP_TRIALS, constant_liar=False)


def launchable_draw(space, rng: random.Random, seen: Callable[[dict[str, Any]], bool],
                    ruled_out: Callable[[dict[str, Any]], str | None] = lambda params: None,
                    tries: int = 5000) -> dict[str, Any] | None:
    """A uniform random configuration of the space that can run here and was not measured yet,
    or None when `tries` draws found none. TPE's own start-up draws are uniform over the whole
    grid, and on large machines most of it cannot run (a quarter of the grid on 2 cores, 97.5%
    of it on a simulated SNC3 socket: ranks x threads beyond the cores, batches the ranks cannot
    split): its six random trials then measured almost nothing, and the model started from
    constraint violations alone (docs/benchmarks.md, "Search at scale"). Ruled-out draws cost a
    planner call each, no trial."""
    for _ in range(tries):
        params = {k: rng.choice(list(v)) for k, v in space.knobs.items()}
        if not seen(params) and ruled_out(params) is None:
            return params
    return None


def default_launch(space, topology: Topology) -> Config:
    """What a user runs without tuning. On CPUs: one process, torch's threads, fp32. For a GPU
    space: `torchrun --nproc-per-node=<GPUs>` with NCCL and no binding; torchrun sets
    OMP_NUM_THREADS=1 when it starts several processes, so that is the default's threads."""
    fixed = getattr(space, "fixed", {}) or {}
    if fixed.get("device") != "cuda":
        return Config()
    gpus = max(1, len(topology.gpus))
    backend = "nccl" if "nccl" in topology.capabilities.backends else "gloo"
    return Config(device="cuda", nproc=gpus, backend=backend, threads=1 if gpus > 1 else None)


def reference_configs(topology: Topology, base: Config,
                      space=None) -> list[tuple[str, Config]]:
    """The default launch, and the launcher heuristic: on CPUs torch.backends.xeon.run_cpu's
    (one process per NUMA node on its physical cores, bound, with the best allocator and OpenMP
    found), on GPUs torchrun's `--numa-binding=node` (each rank on every logical CPU of its GPU's
    NUMA node, through numactl). Where `space` offers compile, the default launch compiled: the
    reference a PyTorch 2 user already has (issue 59)."""
    compiled = [(Role.DEFAULT_COMPILED, base.with_(compile=True))] \
        if compile_offered(space) and not base.compile else []
    return _launchers(topology, base) + compiled


def compile_offered(space) -> bool:
    """Whether the resolved space lets a launch compile (resolution drops compile=true where
    the machine cannot compile: space/resolve.py)."""
    if space is None:
        return False
    return True in (getattr(space, "knobs", None) or {}).get("compile", ()) or \
        (getattr(space, "fixed", None) or {}).get("compile") is True


def _launchers(topology: Topology, base: Config) -> list[tuple[str, Config]]:
    caps = topology.capabilities
    if base.device == "cuda":
        return [(Role.DEFAULT, base),
                (Role.RUN_CPU, base.with_(numa_binding="node", binding="numactl_smt"))]
    nodes = max(1, len(topology.compute_nodes()))
    alloc = next((a for a in ("tcmalloc", "jemalloc") if caps.allocators.get(a)), "default")
    binding = "numactl" if caps.numactl else "taskset" if caps.taskset else "none"
    run_cpu = base.with_(nproc=nodes, ranks_per_numa_node=1 if nodes > 1 else None, threads=None,
                         binding=binding, allocator=alloc,
                         omp_runtime="libiomp5" if caps.omp_runtimes.get("libiomp5") else "libgomp")
    return [(Role.DEFAULT, base), (Role.RUN_CPU, run_cpu)]


def unseen(space, known: dict, rng: random.Random,
           key: Callable[[Config], str]) -> dict[str, Any] | None:
    """A random configuration of the space not evaluated yet (None when all are)."""
    def seen(params: dict[str, Any]) -> bool:
        return key(space.to_config(params)) in known
    # small or nearly exhausted spaces: walk the grid
    return launchable_draw(space, rng, seen, tries=500) or \
        next((p for p in space.grid() if not seen(p)), None)
