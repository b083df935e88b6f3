"""Where each rank runs (pure): its NUMA node, its physical cores and the CPUs it is bound to,
and the one canonical spelling of a configuration (so two spellings never run twice)."""
from __future__ import annotations

from dataclasses import dataclass

from ..config import CCL_KNOBS, Config
from ..errors import ConfigError
from ..probe.topology import Core, Topology
from .gpu import gpu_ranks


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Where each rank runs: its NUMA node, its physical cores and the CPUs it is bound to."""
    node: int | None
    cores: tuple[Core, ...]
    cpus: tuple[int, ...]
    threads: int | None
    # Where this rank's oneCCL progress workers run (backend=ccl): cores of their own taken out
    # of the compute set (ccl_worker_affinity=dedicated), or the rank's last compute CPUs (shared).
    ccl_cpus: tuple[int, ...] = ()


def canonical(config: Config, topology: Topology) -> Config:
    """The same launch written one way, so that two spellings are never run twice: a
    ranks_per_numa_node that spreads ranks as the default would, and automatic threads that the plan
    resolves to a number anyway (bound or multi-rank), are written as the plan will run them."""
    try:
        placed = rank_placements(config, topology)
    except ConfigError:
        return config
    out = config
    # One rank has no one to talk to: ccl with workers on the rank's own cores launches as gloo
    # does (dedicated worker cores still take cores away from the rank, so that one stays).
    if config.backend == "ccl" and config.nproc == 1 and config.ccl_worker_affinity == "shared":
        out = out.with_(backend="gloo")
    if out.backend != "ccl":   # oneCCL's knobs mean nothing to another backend
        out = out.with_(**{k: getattr(Config(), k) for k in CCL_KNOBS})
    if config.device == "cuda" and config.numa_binding == "none" and config.binding != "none":
        out = out.with_(binding="none")   # the tool has no CPU set to apply
    if out.ranks_per_numa_node is not None and config.device == "cpu":
        spread = out.with_(ranks_per_numa_node=None)
        try:
            if [p.node for p in placements(spread, topology)] == [p.node for p in placed]:
                out = spread
        except ConfigError:
            pass
    threads = {p.threads for p in placed}
    if out.threads is None and len(threads) == 1 and None not in threads:
        out = out.with_(threads=threads.pop())
    return out


def rank_placements(config: Config, topology: Topology) -> list[Placement]:
    """GPU ranks sit near their GPU (plan/gpu.py); CPU ranks spread over NUMA nodes."""
    if config.device != "cuda":
        return placements(config, topology)
    try:
        ranks = gpu_ranks(config, topology)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return [Placement(node=r.node, cores=r.cores, cpus=r.cpus or (), threads=r.threads)
            for r in ranks]


def placements(config: Config, topology: Topology) -> list[Placement]:
    """Spread ranks over NUMA nodes and give each rank a disjoint slice of physical cores."""
    nodes = topology.compute_nodes()
    usable = topology.usable_cores()  # once: it walks every CPU (ms on a 256-CPU machine)
    cores_by_node = {n.id: [c for c in usable if c.node == n.id] for n in nodes}
    if not nodes:  # a machine without NUMA information: one pseudo node holding every core
        cores_by_node = {None: list(usable)}
    node_ids = list(cores_by_node)
    counts = _ranks_per_node(config, len(node_ids))
    smt = config.binding.endswith("_smt")
    # oneCCL progresses collectives on worker threads of its own. "dedicated" gives them cores
    # taken out of the rank's compute set (counted against the machine); "shared" lets them run
    # beside the compute threads on the rank's last cores, where CCL_YIELD decides how politely.
    ccl = config.ccl_workers if config.backend == "ccl" and config.ccl_worker_affinity == "dedicated" else 0
    cap = topology.num_usable_cores() if topology.cpu_quota is not None else None
    out: list[Placement] = []
    for node, count in zip(node_ids, counts):
        cores = cores_by_node[node]
        if cap is not None:  # a cgroup quota smaller than the cpuset: plan on that many cores
            cores = cores[:max(1, cap // len(counts))]
        per_rank = len(cores) // count
        if ccl and per_rank < ccl + 1:
            raise ConfigError(f"ccl_worker_affinity=dedicated with ccl_workers={ccl} needs {ccl + 1} "
                              f"cores per rank ({ccl} for oneCCL's workers); {count} ranks on NUMA "
                              f"node {node} get {per_rank}")
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
            # A rank with DataLoader workers keeps its whole share of the cores: its workers
            # (bound with it) make batches on the cores its compute threads leave, and on
            # theirs while the step waits for a batch (the CPU space's rule, issue 51).
            if not config.dataloader_workers:
                per_rank = need_cores
        for i in range(count):
            mine = tuple(cores[i * per_rank:(i + 1) * per_rank])
            compute = mine[:len(mine) - ccl]
            cpus = tuple(sorted(c for core in compute for c in (core.cpus if smt else core.cpus[:1])))
            ccl_cpus = _ccl_cpus(config, mine[len(mine) - ccl:] if ccl else (), cpus)
            threads = want
            if threads is None and (config.nproc > 1 or config.binding != "none"):
                threads = len(cpus)  # torch would otherwise start one thread per visible core
            out.append(Placement(node=node, cores=compute, cpus=cpus, threads=threads,
                                 ccl_cpus=ccl_cpus))
    return out


def _ranks_per_node(config: Config, num_nodes: int) -> list[int]:
    """How many ranks each NUMA node takes, first nodes first: ranks_per_numa_node each, or spread
    evenly, the first nodes taking the remainder."""
    if config.ranks_per_numa_node is not None:
        if config.nproc % config.ranks_per_numa_node:
            raise ConfigError(f"nproc={config.nproc} is not a multiple of "
                              f"ranks_per_numa_node={config.ranks_per_numa_node}")
        used = config.nproc // config.ranks_per_numa_node
        if used > num_nodes:
            raise ConfigError(f"nproc={config.nproc} with "
                              f"ranks_per_numa_node={config.ranks_per_numa_node} needs {used} "
                              f"NUMA nodes; this machine has {num_nodes}")
        return [config.ranks_per_numa_node] * used
    used = min(config.nproc, num_nodes)
    return [config.nproc // used + (1 if i < config.nproc % used else 0) for i in range(used)]


def _ccl_cpus(config: Config, own: tuple[Core, ...] | list[Core], compute: tuple[int, ...]) -> tuple[int, ...]:
    """One CPU per oneCCL worker: its dedicated cores, else the rank's last compute CPUs
    (repeated when there are more workers than CPUs)."""
    if config.backend != "ccl":
        return ()
    if own:
        return tuple(core.cpus[0] for core in own)
    if not compute:
        return ()
    return tuple(compute[-1 - (i % len(compute))] for i in range(config.ccl_workers))
