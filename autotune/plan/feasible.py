"""The one answer to "can this configuration run here", checked before any launch: the
planner's reasons (`infeasible_reason`), the precision rule, and the space's own rules
(`ruled_out`). The search, verification, `run`, `compare`, `launch` and the space's resolution
all ask here."""
from __future__ import annotations

from ..config import Config
from ..errors import ConfigError
from ..training import split_batch
from ..probe.topology import Topology
from .gpu import gpu_problem
from .memory import memory_problem
from .placement import Placement, placements


def ruled_out(config: Config, space, topology: Topology) -> str | None:
    """Why `config` cannot be launched here (the planner's reason or a broken space rule), or
    None. Ruled-out configurations are recorded as infeasible without running."""
    reason = infeasible_reason(config, topology)
    if reason:
        return reason
    check = getattr(space, "violations", None)
    broken = check(config.to_dict()) if check else []
    return f"violates {broken[0]}" if broken else None


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
    why = ccl_problem(config)
    if why:
        return why
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
    if config.compile and (why := compile_problem(config.device, topology)):
        return f"compile: {why}"
    why = gpu_problem(config, topology) or dataloader_problem(config, topology)
    if why or config.device == "cuda":
        return why or memory_problem(config, topology, [])
    try:
        placed = placements(config, topology)
        # the global batch is the invariant: ranks that cannot share it equally cannot run it
        split_batch(config.global_batch, config.nproc, config.batch_size)
    except ConfigError as exc:
        return str(exc)
    return dataloader_problem(config, topology, placed) or memory_problem(config, topology, placed)


def dataloader_problem(config: Config, topology: Topology,
                       placed: list[Placement] | None = None) -> str | None:
    """DataLoader worker processes beyond the CPUs a rank can have: its CPU set when the ranks are
    bound (`placed`), else every CPU this process may use. More workers than that only wait for
    a CPU, and a stored dataloader_workers=100000 tried to start them all."""
    if not config.dataloader_workers:
        return None
    sets = [set(p.cpus) | set(p.ccl_cpus) for p in placed or ()] if config.binding != "none" else []
    cpus = min(map(len, sets)) if sets else len(topology.usable_cpus or topology.logical_cpus)
    return _workers_beyond(config.dataloader_workers, cpus)


def _workers_beyond(workers: int, cpus: int) -> str | None:
    if workers > cpus:
        return (f"dataloader_workers={workers}: more than the {cpus} CPU{'s' if cpus > 1 else ''} a rank "
                "can have here")
    return None


def rank_problem(config: Config, *, cpus: int) -> str | None:
    """The planner's rules a rank can check itself, with the `cpus` it has (its affinity): the
    oneCCL mixes, the batch split, and no more DataLoader workers than its CPUs. A rank asks
    before it acts on a request (worker/bounds.py): the request is a file, and its numbers are
    judged where they are used, not only where they were planned."""
    try:
        split_batch(config.global_batch, config.nproc, config.batch_size)
    except ConfigError as exc:
        return str(exc)
    return ccl_problem(config) or _workers_beyond(config.dataloader_workers, cpus)


def ccl_problem(config: Config) -> str | None:
    """Mixes of oneCCL knobs that cannot work, or that only waste a trial."""
    if config.backend != "ccl":
        return None
    if config.device == "cuda":
        return "backend ccl reduces CPU tensors here; GPU ranks use nccl"
    if config.ccl_yield == "pause" and config.ccl_worker_affinity == "shared":
        # pause spins: a worker on the rank's own core steals it from the compute threads
        # (a 4 KB all-reduce took 16 ms instead of 0.1 ms on 2 cores)
        return "ccl_yield=pause busy-waits on the rank's own cores; use it with ccl_worker_affinity=dedicated"
    return None


def cpu_precision(precision: str, topology: Topology) -> str:
    """How this CPU computes `precision`: "native", "emulated" (runs, slower than fp32) or
    "unsupported" (never run). The one rule for precisions on CPUs: bf16 autocast runs everywhere
    (emulated where the ISA lacks it, slower but correct), while fp16 runs only with AMX-FP16
    tiles (amx_fp16): avx512_fp16 alone is not enough. oneDNN (3.12, in torch 2.13) has no
    optimized fp16 convolution backward-weights kernel but the AMX one, so on a Sapphire/Emerald
    Rapids class CPU (avx512_fp16, amx_bf16, no amx_fp16) every conv's weight gradient ran its
    reference C loop ("ref:any"): 410 ms against 3-7 ms in fp32 for one 16-channel 3x3 conv,
    and the cnn's step took 4.3 s against 75 ms (1 thread), while fp16 linear layers were no
    faster than fp32 there. The space's `supported_precisions`, its notes and every trial's
    check read this."""
    if precision == "bf16":
        return "native" if topology.isa.bf16 else "emulated"
    if precision == "fp16":
        return "native" if "amx_fp16" in topology.isa.flags else "unsupported"
    return "native"


def precision_problem(precision: str, device: str, topology: Topology) -> str | None:
    """Why `precision` cannot run on `device` here, or None. CUDA GPUs do bf16 and fp16 math
    natively (fp16 since Pascal, bf16 autocast falls back to fp32 math on pre-Ampere parts but
    still runs); CPUs follow `cpu_precision`."""
    if device == "cpu" and cpu_precision(precision, topology) == "unsupported":
        # only fp16 is ever unsupported on a CPU
        return (f"precision {precision}: this CPU has no native {precision} training (amx_fp16; "
                "with avx512_fp16 alone, fp16 convolution gradients run oneDNN's reference kernel)")
    return None


def compile_problem(device: str, topology: Topology) -> str | None:
    """Why torch.compile cannot run on `device` here (the probe's one line), or None: inductor
    builds C++ on CPUs and Triton kernels on GPUs."""
    caps = topology.capabilities
    if device == "cuda":
        return caps.triton_problem
    return caps.compile_problem or (None if caps.cxx_compiler
                                    else "no C++ compiler found; fix: apt-get install g++")
