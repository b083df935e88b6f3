"""Build a launch plan: a pure function of (config, topology, workload) -> LaunchPlan.

Nothing here touches the machine. The base environment, interpreter and rendezvous port come in
as values, so a plan for a captured 2-socket machine can be built and tested anywhere.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from .bind import command as bind_command
from .config import REFERENCE_GLOBAL_BATCH, Config
from .errors import ConfigError
from .gpu_plan import CUDA_ENV, cuda_env, gpu_problem, gpu_ranks
from .plan_types import LaunchPlan, RankExpect, RankPlan, WorkerRequest, cpulist
from .quality import split_batch
from .topology import Core, Topology

# jemalloc's default settings made the reference CNN up to 2x slower here; this MALLOC_CONF
# (measured; run_cpu's shorter one does not fix it) keeps freed pages and avoids madvise storms.
JEMALLOC_CONF = ("oversize_threshold:1,background_thread:true,metadata_thp:auto,"
                 "dirty_decay_ms:-1,muzzy_decay_ms:-1")


# Variables the plan owns: inherited values would silently change what a trial measures.
OWNED_ENV = ("LD_PRELOAD", "MALLOC_CONF", "OMP_NUM_THREADS", "KMP_AFFINITY", "KMP_BLOCKTIME",
             "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
             "CCL_WORKER_COUNT", "CCL_WORKER_AFFINITY", "CCL_ATL_TRANSPORT", "GOMP_CPU_AFFINITY",
             "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE",
             "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
             *CUDA_ENV)


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Where each rank runs: its NUMA node, its physical cores and the CPUs it is bound to."""
    node: int | None
    cores: tuple[Core, ...]
    cpus: tuple[int, ...]
    threads: int | None
    ccl_cpu: int | None = None  # the core taken out of the compute set for oneCCL's worker


def infeasible_reason(config: Config, topology: Topology) -> str | None:
    """Why this configuration cannot work on this machine, or None. Checked before any launch.
    Across hosts (nnodes > 1) each host runs its share of the ranks, and hosts have the same shape
    (hosts.differences refuses others), so one host's share is what is checked."""
    if config.nnodes > 1:
        config = config.with_(nproc=config.nproc // config.nnodes, nnodes=1)
    caps = topology.capabilities
    if config.backend not in caps.backends:
        why = f" ({caps.ccl_problem})" if config.backend == "ccl" and caps.ccl_problem else ""
        return f"backend {config.backend} not available here; found: {', '.join(caps.backends)}{why}"
    if config.allocator != "default" and not caps.allocators.get(config.allocator):
        return f"allocator {config.allocator} not found on this machine"
    if config.omp_runtime != "libgomp" and not caps.omp_runtimes.get(config.omp_runtime):
        return f"OpenMP runtime {config.omp_runtime} not found (pip install intel-openmp)"
    if config.binding.startswith("numactl") and not caps.numactl:
        return "binding numactl: numactl is missing or blocked here"
    if config.binding.startswith("taskset") and not caps.taskset:
        return "binding taskset: taskset is missing or not usable here"
    why = precision_problem(config.precision, config.device, topology)
    if why:
        return why
    if config.ipex == "on" and not caps.ipex_version:
        return f"ipex on: {caps.ipex_problem or 'intel-extension-for-pytorch is not installed'}"
    if config.compile and not caps.cxx_compiler:
        return "compile: torch.compile needs a C++ compiler and none was found"
    why = gpu_problem(config, topology)
    if why or config.device == "cuda":
        return why
    try:
        _placements(config, topology)
        # the global batch is the invariant: ranks that cannot share it equally cannot run it
        split_batch(config.global_batch, config.nproc, config.batch_size)
    except ConfigError as exc:
        return str(exc)
    return None


def precision_problem(precision: str, device: str, topology: Topology) -> str | None:
    """The one rule for precisions. CUDA GPUs do bf16 and fp16 math natively (fp16 since Pascal,
    bf16 autocast falls back to fp32 math on pre-Ampere parts but still runs). On a CPU, bf16
    autocast runs everywhere (emulated where the ISA lacks it, slower but correct), while fp16 is
    offered only with native fp16 instructions: emulated fp16 is far slower than fp32 and its
    GradScaler on CPU adds cost for nothing."""
    if precision == "fp16" and device == "cpu" and not topology.isa.fp16:
        return "precision fp16: this CPU has no native fp16 (avx512_fp16/amx_fp16)"
    return None


def canonical(config: Config, topology: Topology) -> Config:
    """The same launch written one way, so that two spellings are never run twice: a
    nproc_per_node that spreads ranks as the default would, and automatic threads that the plan
    resolves to a number anyway (bound or multi-rank), are written as the plan will run them."""
    try:
        placed = _rank_placements(config, topology)
    except ConfigError:
        return config
    out = config
    if config.device == "cuda" and config.numa_binding == "none" and config.binding != "none":
        out = out.with_(binding="none")   # the tool has no CPU set to apply
    if out.nproc_per_node is not None and config.device == "cpu":
        spread = out.with_(nproc_per_node=None)
        try:
            if [p.node for p in _placements(spread, topology)] == [p.node for p in placed]:
                out = spread
        except ConfigError:
            pass
    threads = {p.threads for p in placed}
    if out.threads is None and len(threads) == 1 and None not in threads:
        out = out.with_(threads=threads.pop())
    return out


def _rank_placements(config: Config, topology: Topology) -> list[Placement]:
    """GPU ranks sit near their GPU (gpu_plan.py); CPU ranks spread over NUMA nodes."""
    if config.device != "cuda":
        return _placements(config, topology)
    try:
        ranks = gpu_ranks(config, topology)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return [Placement(node=r.node, cores=r.cores, cpus=r.cpus or (), threads=r.threads)
            for r in ranks]


def _placements(config: Config, topology: Topology) -> list[Placement]:
    """Spread ranks over NUMA nodes and give each rank a disjoint slice of physical cores."""
    nodes = topology.compute_nodes()
    usable = topology.usable_cores()  # once: it walks every CPU (ms on a 256-CPU machine)
    cores_by_node = {n.id: [c for c in usable if c.node == n.id] for n in nodes}
    if not nodes:  # a machine without NUMA information: one pseudo node holding every core
        cores_by_node = {None: list(usable)}
    node_ids = list(cores_by_node)
    if config.nproc_per_node is not None:
        if config.nproc % config.nproc_per_node:
            raise ConfigError(f"nproc={config.nproc} is not a multiple of "
                              f"nproc_per_node={config.nproc_per_node}")
        used = config.nproc // config.nproc_per_node
        if used > len(node_ids):
            raise ConfigError(f"nproc={config.nproc} with nproc_per_node={config.nproc_per_node} "
                              f"needs {used} NUMA nodes; this machine has {len(node_ids)}")
        counts = [config.nproc_per_node] * used
    else:  # spread evenly, the first nodes taking the remainder
        used = min(config.nproc, len(node_ids))
        counts = [config.nproc // used + (1 if i < config.nproc % used else 0) for i in range(used)]

    smt = config.binding.endswith("_smt")
    # oneCCL progresses collectives on its own worker thread; it gets a core of its own, taken
    # out of the rank's compute set, or it competes with the OpenMP threads every step.
    ccl = 1 if config.backend == "ccl" else 0
    cap = topology.num_usable_cores() if topology.cpu_quota is not None else None
    out: list[Placement] = []
    for node, count in zip(node_ids, counts):
        cores = cores_by_node[node]
        if cap is not None:  # a cgroup quota smaller than the cpuset: plan on that many cores
            cores = cores[:max(1, cap // len(counts))]
        per_rank = len(cores) // count
        if ccl and per_rank < 2:
            raise ConfigError(f"backend ccl needs 2 cores per rank (one for the oneCCL worker); "
                              f"{count} ranks on NUMA node {node} get {per_rank}")
        if per_rank < 1:
            raise ConfigError(f"{count} ranks on NUMA node {node} but it has only "
                              f"{len(cores)} usable physical core(s)")
        want = config.threads
        if want is not None:
            # SMT siblings add logical CPUs, so with *_smt a rank may run 2 threads per core.
            per_core = max(len(c.cpus) for c in cores) if smt else 1
            need_cores = -(-want // per_core) + ccl
            if need_cores > per_rank:
                total = want * config.nproc
                raise ConfigError(f"threads={want} x nproc={config.nproc} = {total} exceeds the "
                                  f"{len(cores) * per_core * len(counts)} usable "
                                  f"{'logical CPUs' if smt else 'physical cores'}")
            per_rank = need_cores
        for i in range(count):
            mine = tuple(cores[i * per_rank:(i + 1) * per_rank])
            ccl_cpu = mine[-1].cpus[0] if ccl else None
            compute = mine[:-1] if ccl else mine
            cpus = tuple(sorted(c for core in compute for c in (core.cpus if smt else core.cpus[:1])))
            threads = want
            if threads is None and (config.nproc > 1 or config.binding != "none"):
                threads = len(cpus)  # torch would otherwise start one thread per visible core
            out.append(Placement(node=node, cores=compute, cpus=cpus, threads=threads,
                                 ccl_cpu=ccl_cpu))
    return out


def build_plan(config: Config, topology: Topology, *, workload: str = "cnn",
               workload_args: dict | None = None, workdir: str, master_port: int,
               base_env: dict[str, str], timeout_s: float = 120.0, grace_s: float = 5.0,
               mode: str = "throughput", target_seconds: float = 5.0, warmup_steps: int = 3,
               accuracy_samples: int = 4096, python: str = sys.executable,
               trial_id: str = "trial", program: tuple[str, ...] | None = None,
               script: bool = False, seed: int = 0,
               reference_batch: int = REFERENCE_GLOBAL_BATCH,
               local_rank_arg: str | None = None) -> LaunchPlan:
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
    placements = _rank_placements(config, topology)
    caps = topology.capabilities
    env_delta = env_for(config, topology)
    gpu = config.device == "cuda"
    membind_ok = config.binding.startswith("numactl") and caps.numactl_membind and not gpu
    # GPU ranks are bound only when a numa_binding mode chose their CPUs
    bound = config.binding != "none" and (not gpu or config.numa_binding != "none")
    expects, ranks = [], []
    request_path = os.path.join(workdir, "request.json")
    for rank, pl in enumerate(placements):
        # The process may run on its compute cores plus the oneCCL worker's core; OpenMP is
        # kept off the latter by GOMP_CPU_AFFINITY (see ccl_env).
        cpus = tuple(sorted(pl.cpus + ((pl.ccl_cpu,) if pl.ccl_cpu is not None else ())))
        mem_node = pl.node if membind_ok and pl.node is not None else None
        expects.append(RankExpect(cpus=cpus if bound else None, threads=pl.threads,
                                  allocator=config.allocator, omp_runtime=config.omp_runtime,
                                  precision=config.precision, mem_node=mem_node,
                                  device=f"cuda:{rank}" if gpu else "cpu",
                                  backend=config.backend))
        env = {**{k: v for k, v in base_env.items() if k not in OWNED_ENV}, **env_delta}
        if pl.threads is not None:
            env["OMP_NUM_THREADS"] = str(pl.threads)
        env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(config.nproc),
                   LOCAL_WORLD_SIZE=str(config.nproc), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(master_port), AUTOTUNE_TRIAL_ID=trial_id,
                   AUTOTUNE_RESULT=os.path.join(workdir, f"rank{rank}.json"),
                   AUTOTUNE_REPORT=os.path.join(workdir, f"rank{rank}.report.json"))
        if script:
            env.update(torchrun_env(rank, config.nproc, trial_id))
        if config.backend == "ccl":
            env.update(ccl_env(pl))
        per_rank = (f"{local_rank_arg}={rank}",) if local_rank_arg and program else ()
        argv = (*binding_prefix(config.binding if bound else "none", cpus, mem_node),
                *(program or (python, "-m", "autotune.worker", "--request", request_path)),
                *per_rank)
        ranks.append(RankPlan(rank=rank, argv=argv, env=env, cpus=cpus if bound else None,
                              mem_node=mem_node, log_path=os.path.join(workdir, f"rank{rank}.log"),
                              result_path=env["AUTOTUNE_RESULT"]))
    request = WorkerRequest(workload=workload, config=config.to_dict(), ranks=tuple(expects),
                            mode=mode, warmup_steps=warmup_steps, target_seconds=target_seconds,
                            accuracy_samples=accuracy_samples, workload_args=workload_args or {},
                            seed=seed, reference_batch=reference_batch)
    shown = dict(env_delta)
    threads = {str(p.threads) for p in placements if p.threads is not None}
    if threads:
        shown["OMP_NUM_THREADS"] = ",".join(sorted(threads))
    return LaunchPlan(ranks=tuple(ranks), request_path=request_path, request=request,
                      timeout_s=timeout_s, grace_s=grace_s, master_port=master_port,
                      workdir=workdir, env_delta=shown, script=script)


def env_for(config: Config, topology: Topology) -> dict[str, str]:
    """Environment the configuration adds for every rank (allocator, OpenMP runtime)."""
    caps = topology.capabilities
    preload: list[str] = []
    env: dict[str, str] = {}
    if config.allocator != "default":
        preload.append(caps.allocators[config.allocator])
        if config.allocator == "jemalloc":
            env["MALLOC_CONF"] = JEMALLOC_CONF
    if config.omp_runtime == "libiomp5":
        # Preloading libiomp5 makes torch's libgomp calls resolve to Intel's runtime.
        preload.append(caps.omp_runtimes["libiomp5"])
        env["KMP_AFFINITY"] = config.kmp_affinity
        env["KMP_BLOCKTIME"] = str(config.kmp_blocktime)
    if preload:
        env["LD_PRELOAD"] = ":".join(preload)
    if config.device == "cuda":
        env.update(cuda_env(config, topology))
    return env


def torchrun_env(rank: int, world_size: int, run_id: str) -> dict[str, str]:
    """What torchrun adds besides RANK/WORLD_SIZE/MASTER_*, for scripts that read it (one node,
    one role, no restarts)."""
    return {"GROUP_RANK": "0", "ROLE_RANK": str(rank), "ROLE_NAME": "default",
            "GROUP_WORLD_SIZE": "1", "ROLE_WORLD_SIZE": str(world_size),
            "TORCHELASTIC_RUN_ID": run_id, "TORCHELASTIC_RESTART_COUNT": "0",
            "TORCHELASTIC_MAX_RESTARTS": "0"}


def binding_prefix(binding: str, cpus: tuple[int, ...], mem_node: int | None) -> tuple[str, ...]:
    if binding == "none":
        return ()
    tool = binding.split("_")[0]  # numactl_smt -> numactl
    return tuple(bind_command(tool, cpulist(cpus), None if mem_node is None else str(mem_node), []))


def ccl_env(pl: Placement) -> dict[str, str]:
    """oneCCL's environment: one worker thread pinned to the core the placement set aside."""
    return {"CCL_WORKER_COUNT": "1", "CCL_WORKER_AFFINITY": str(pl.ccl_cpu),
            "CCL_ATL_TRANSPORT": "ofi", "GOMP_CPU_AFFINITY": cpulist(pl.cpus)}
