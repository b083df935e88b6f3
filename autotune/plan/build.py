"""Build a launch plan: a pure function of (config, topology, workload) -> LaunchPlan.

Nothing here touches the machine. The base environment, interpreter and rendezvous port come in
as values, so a plan for a captured 2-socket machine can be built and tested anywhere.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from ..bind import command as bind_command
from ..util.child_python import python_module
from ..util.search_path import clean as clean_search_paths
from ..util.compile_cache import COMPILE_CACHE_ENV, compile_cache_env
from ..comm.ccl.env import CCL_ENV
from ..comm.ccl.env import rank_env as ccl_rank_env
from ..comm.ccl.env import script_env as ccl_script_env
from ..config import DEFAULT_WORKLOAD, REFERENCE_GLOBAL_BATCH, Config
from ..errors import ConfigError
from ..probe.topology import Topology
from ..training import QUALITY_SAMPLES
from .feasible import infeasible_reason
from .gpu import CUDA_ENV, cuda_env
from .launch_plan import (KILL_GRACE_S, RENDEZVOUS_ENV, RENDEZVOUS_FILE, TARGET_SECONDS,
                          TRIAL_TIMEOUT_S, WARMUP_STEPS, LaunchPlan, RankExpect, RankPlan, WorkerRequest,
                          rank_files_env)
from .memory import MemPlacement, rank_memory
from ..probe.parse import format_cpulist
from .placement import Placement, rank_placements

# jemalloc's default settings made the reference CNN up to 2x slower here; this MALLOC_CONF
# (measured; run_cpu's shorter one does not fix it) keeps freed pages and avoids madvise storms.
JEMALLOC_CONF = ("oversize_threshold:1,background_thread:true,metadata_thp:auto,"
                 "dirty_decay_ms:-1,muzzy_decay_ms:-1")


# Variables the plan owns: inherited values would silently change what a trial measures.
OWNED_ENV = ("LD_PRELOAD", "MALLOC_CONF", "OMP_NUM_THREADS", "KMP_AFFINITY", "KMP_BLOCKTIME",
             "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
             RENDEZVOUS_ENV, *CCL_ENV, "GOMP_CPU_AFFINITY",
             "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE",
             "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
             *CUDA_ENV, *COMPILE_CACHE_ENV)


def build_plan(config: Config, topology: Topology, *, workload: str = DEFAULT_WORKLOAD,
               workload_args: dict | None = None, workdir: str, master_port: int,
               base_env: dict[str, str], timeout_s: float = TRIAL_TIMEOUT_S,
               grace_s: float = KILL_GRACE_S, mode: str = "throughput",
               target_seconds: float = TARGET_SECONDS, warmup_steps: int = WARMUP_STEPS,
               accuracy_samples: int = QUALITY_SAMPLES, python: str = sys.executable,
               trial_id: str = "trial", program: tuple[str, ...] | None = None,
               script: bool = False, seed: int = 0,
               reference_batch: int = REFERENCE_GLOBAL_BATCH,
               local_rank_arg: str | None = None,
               leader_throughput: float | None = None) -> LaunchPlan:
    """The complete launch of one trial. Raises ConfigError when the config cannot work here.

    `program` replaces the timed worker (`python -m autotune.worker --request ...`) by another
    command, e.g. the training command an export hands to the user. `script`: that command is
    the user's own script, which writes no worker result (the runner judges it by exit code); it
    gets torchrun's whole environment, and `local_rank_arg` ("--local-rank") with each rank's
    number for scripts written for torch.distributed.launch."""
    if config.nnodes > 1:
        raise ConfigError(f"nnodes={config.nnodes} needs --hosts (or a hostfile or SLURM "
                          "allocation)")
    reason = infeasible_reason(config, topology)
    if reason:
        raise ConfigError(reason)
    placements = rank_placements(config, topology)
    gpu = config.device == "cuda"
    bound = config.binding != "none" and (not gpu or config.numa_binding != "none")
    memory = tuple(rank_memory(config, topology, pl, bound) for pl in placements)
    launch = _Launch(
        config=config, placements=tuple(placements),
        # a script may compile itself: its ranks get the private compile cache too
        env_delta={**env_for(config, topology), **(compile_cache_env() if script else {})},
        base_env=base_env, workdir=workdir, request_path=os.path.join(workdir, "request.json"),
        master_port=master_port, trial_id=trial_id, python=python, program=program,
        script=script, local_rank_arg=local_rank_arg, gpu=gpu,
        membind_ok=(config.binding.startswith("numactl")
                    and topology.capabilities.numactl_membind and not gpu),
        # GPU ranks are bound only when a numa_binding mode chose their CPUs
        bound=bound, memory=memory)
    both = [_rank(launch, rank, pl) for rank, pl in enumerate(placements)]
    expects, ranks = tuple(e for e, _ in both), tuple(r for _, r in both)
    request = WorkerRequest(workload=workload, config=config.to_dict(), ranks=expects,
                            mode=mode, warmup_steps=warmup_steps, target_seconds=target_seconds,
                            accuracy_samples=accuracy_samples, workload_args=workload_args or {},
                            seed=seed, reference_batch=reference_batch,
                            leader_throughput=leader_throughput if mode == "throughput" else None)
    return LaunchPlan(ranks=ranks, request_path=launch.request_path, request=request,
                      timeout_s=timeout_s, grace_s=grace_s, master_port=master_port,
                      workdir=workdir, env_delta=_shown_env(launch, ranks), script=script)


@dataclass(frozen=True, kw_only=True)
class _Launch:
    """What every rank of one plan shares."""
    config: Config
    placements: tuple[Placement, ...]
    env_delta: dict[str, str]        # what the configuration adds for every rank (env_for)
    base_env: dict[str, str]
    workdir: str
    request_path: str
    master_port: int
    trial_id: str
    python: str
    program: tuple[str, ...] | None
    script: bool
    local_rank_arg: str | None
    gpu: bool
    membind_ok: bool                 # numactl may bind memory as well as CPUs
    bound: bool                      # the ranks run under a binding tool
    memory: tuple = ()               # per rank: its MemPlacement (mem_policy), None for local


def _rank(launch: _Launch, rank: int, pl: Placement) -> tuple[RankExpect, RankPlan]:
    """One rank: what it should see in force, and how to start it."""
    config = launch.config
    # The process may run on its compute cores plus its oneCCL workers' dedicated cores;
    # OpenMP is kept off the latter by GOMP_CPU_AFFINITY (see ccl_env).
    cpus = tuple(sorted(set(pl.cpus) | set(pl.ccl_cpus)))
    placed = launch.memory[rank] if rank < len(launch.memory) else None
    mem = placed.spec() if isinstance(placed, MemPlacement) else None
    mem_node = pl.node if launch.membind_ok and pl.node is not None and not mem else None
    ccl = ccl_env(config, pl, rank, list(launch.placements)) if config.backend == "ccl" else {}
    # With dedicated oneCCL cores, GOMP_CPU_AFFINITY binds the rank's main thread to its
    # compute cores, so that is what the rank itself shows (the workers bind themselves).
    seen = pl.cpus if "GOMP_CPU_AFFINITY" in ccl else cpus
    expect = RankExpect(cpus=seen if launch.bound else None, threads=pl.threads,
                        allocator=config.allocator, omp_runtime=config.omp_runtime,
                        precision=config.precision, mem_node=mem_node,
                        device=f"cuda:{rank}" if launch.gpu else "cpu", backend=config.backend,
                        mem_policy=mem)
    env = _rank_env(launch, rank, pl, ccl)
    per_rank = ((f"{launch.local_rank_arg}={rank}",)
                if launch.local_rank_arg and launch.program else ())
    argv = (*binding_prefix(config.binding if launch.bound else "none", cpus, mem_node, mem),
            *(launch.program or python_module("autotune.worker", "--request",
                                              launch.request_path, python=launch.python)),
            *per_rank)
    plan = RankPlan(rank=rank, argv=argv, env=env, cpus=cpus if launch.bound else None,
                    mem_node=mem_node, log_path=os.path.join(launch.workdir, f"rank{rank}.log"),
                    result_path=env["AUTOTUNE_RESULT"], mem_policy=mem)
    return expect, plan


def _rank_env(launch: _Launch, rank: int, pl: Placement, ccl: dict[str, str]) -> dict[str, str]:
    """A rank's whole environment: the inherited one less what the plan owns, then the plan's."""
    config, workdir = launch.config, launch.workdir
    inherited = clean_search_paths(launch.base_env)   # no '' or '.' on a rank's search paths
    env = {**{k: v for k, v in inherited.items() if k not in OWNED_ENV}, **launch.env_delta}
    if pl.threads is not None:
        env["OMP_NUM_THREADS"] = str(pl.threads)
    env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(config.nproc),
               LOCAL_WORLD_SIZE=str(config.nproc), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(launch.master_port), AUTOTUNE_TRIAL_ID=launch.trial_id,
               **rank_files_env(workdir, rank))
    if launch.script:
        env.update(torchrun_env(rank, config.nproc, launch.trial_id))
    else:   # the ranks of one machine meet in the trial folder (worker/rendezvous.py)
        env[RENDEZVOUS_ENV] = RENDEZVOUS_FILE
        # a launch kept running may serve a compiled window though it started eager (compile is
        # a window knob): its ranks hold the private cache from the start (util/compile_cache.py)
        env.update(compile_cache_env())
    if config.backend == "ccl":
        env.update(ccl)
        if launch.script:   # `import oneccl_bindings_for_pytorch` finds autotune's stand-in
            env.update(ccl_script_env(launch.base_env))
    return env


def _shown_env(launch: _Launch, ranks: tuple[RankPlan, ...]) -> dict[str, str]:
    """The environment the plan shows (dry run, export): the configuration's additions, the
    thread counts and the oneCCL settings, each rank's in rank order where they differ."""
    shown = dict(launch.env_delta)
    threads = {str(p.threads) for p in launch.placements if p.threads is not None}
    if threads:
        shown["OMP_NUM_THREADS"] = ",".join(sorted(threads))
    for key in CCL_ENV if launch.config.backend == "ccl" else ():
        values = [r.env[key] for r in ranks if key in r.env]
        if values:   # one value, or each rank's in rank order (CCL_LOCAL_RANK)
            shown[key] = values[0] if len(set(values)) == 1 else ",".join(values)
    return shown


def env_for(config: Config, topology: Topology) -> dict[str, str]:
    """Environment the configuration adds for every rank (allocator, OpenMP runtime)."""
    env: dict[str, str] = {}
    if config.allocator == "jemalloc":
        env["MALLOC_CONF"] = JEMALLOC_CONF
    if config.omp_runtime == "libiomp5":
        env["KMP_AFFINITY"] = config.kmp_affinity
        env["KMP_BLOCKTIME"] = str(config.kmp_blocktime)
    preload = [path for _name, path in preloads(config, topology)]
    if preload:
        env["LD_PRELOAD"] = ":".join(preload)
    if config.device == "cuda":
        env.update(cuda_env(config, topology))
    if config.compile:   # never torch's default under /tmp (util/compile_cache.py)
        env.update(compile_cache_env())
    return env


def preloads(config: Config, topology: Topology) -> list[tuple[str, str]]:
    """(library name, path) of each library the configuration preloads, from the topology's
    probe: the allocator, then Intel's OpenMP runtime (preloading libiomp5 makes torch's libgomp
    calls resolve to it). The one answer, read by env_for and by the export's check of paths
    stored in a study (study/trust.py)."""
    caps = topology.capabilities
    out = []
    if config.allocator != "default":
        out.append((config.allocator, caps.allocators[config.allocator]))
    if config.omp_runtime == "libiomp5":
        out.append(("libiomp5", caps.omp_runtimes["libiomp5"]))
    return out


def torchrun_env(rank: int, world_size: int, run_id: str) -> dict[str, str]:
    """What torchrun adds besides RANK/WORLD_SIZE/MASTER_*, for scripts that read it (one node,
    one role, no restarts)."""
    return {"GROUP_RANK": "0", "ROLE_RANK": str(rank), "ROLE_NAME": "default",
            "GROUP_WORLD_SIZE": "1", "ROLE_WORLD_SIZE": str(world_size),
            "TORCHELASTIC_RUN_ID": run_id, "TORCHELASTIC_RESTART_COUNT": "0",
            "TORCHELASTIC_MAX_RESTARTS": "0"}


def binding_prefix(binding: str, cpus: tuple[int, ...], mem_node: int | None,
                   mem: str | None = None) -> tuple[str, ...]:
    """numactl/taskset and their flags; an unbound rank with a memory policy (`mem`) runs under
    numactl with the policy's flags alone."""
    if binding == "none":
        return tuple(bind_command("numactl", None, None, [], mem=mem)) if mem else ()
    tool = binding.split("_")[0]  # numactl_smt -> numactl
    return tuple(bind_command(tool, format_cpulist(cpus),
                              None if mem_node is None else str(mem_node), [], mem=mem))


def ccl_env(config: Config, pl: Placement, rank: int,
            placements: list[Placement]) -> dict[str, str]:
    """oneCCL's environment for one rank of this host: its knobs, and every local rank's worker
    cores in local-rank order (oneCCL takes its own slice by CCL_LOCAL_RANK)."""
    # Always named, bound or not: left to itself oneCCL pins every local rank's workers by its
    # own rule, and 2 unbound ranks on 2 cores then hung in communicator set-up 2 times in 3.
    dedicated = config.ccl_worker_affinity == "dedicated"
    workers = tuple(c for p in placements for c in p.ccl_cpus) or None
    env = ccl_rank_env(local_rank=rank, local_size=len(placements), workers=config.ccl_workers,
                       yield_mode=config.ccl_yield, worker_cpus=workers, iface="lo")
    if dedicated and pl.cpus:   # OpenMP stays on the compute cores, off the workers'
        env["GOMP_CPU_AFFINITY"] = format_cpulist(pl.cpus)
    return env
