"""What the hardware says before any trial, and a coordinate descent around the leader (pure).

A search that starts from random draws spends its first trials learning what the probe already
knows: a bound rank should fill its share of a node, a native bf16 unit makes bf16 faster, tcmalloc
or jemalloc beat glibc's allocator for thousands of short-lived tensors, numactl keeps memory on
the rank's node, Intel's OpenMP suits Intel CPUs. `first_guess` writes that down as one launch;
`Descent` then changes one knob at a time around the best configuration measured so far, the
most consequential knobs first, as AutoCCL tunes NCCL (Xu et al., NSDI 2025: coordinate descent
over a few influential parameters). When no neighbour of the leader is left to try, the search
hands over to the model-guided sampler (benchmarks: docs/search-at-scale.md compares both).

Across hosts (`nnodes`, which the space gains with --hosts) the guess spans every host: the user
gave them to be used, and the references already measure one host. The descent's second knob is
`nnodes`, so one host against all of them around the leader comes early too.

Generic over knobs: a knob this module has no opinion on (one a space adds, a backend's own)
keeps the default launch's value in the guess and is varied last by the descent, in the order
the space lists its choices.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..config import Config
from ..plan.placement import canonical
from ..probe.topology import Topology
from ..study.records import Record

Params = dict[str, Any]

# Which value to try first, knob by knob; values a space does not offer are skipped.
_PREFER: dict[str, tuple[Any, ...]] = {
    "threads": (None,),                       # auto: a bound rank takes all of its cores
    "binding": ("numactl", "taskset", "numactl_smt", "taskset_smt", "none"),
    "allocator": ("tcmalloc", "jemalloc", "default"),
    "backend": ("ccl", "gloo"),               # oneCCL's shared-memory transport, where found
    "ipex": ("off",),                         # a library's own rewrite: measured, not assumed
    # HBM in flat mode is there to be used (Intel's Xeon Max guide: numactl --preferred to the
    # HBM node); preferred falls back to DRAM when it is full, so it is a safe first guess
    "mem_policy": ("preferred_fast", "local"),
}
# The descent's knob order: the global batch first (a larger one amortises each step's fixed cost
# and all-reduce over more samples, the largest effect in the model; it changes the math, so the
# quality gate judges it, and the guess keeps the default's), then the layout (how much of the
# machine works), the work per sample, the rest of the launch. Knobs not listed follow.
DESCENT_ORDER = ("global_batch", "nnodes", "ranks_per_numa_node", "precision", "backend", "allocator",
                 "binding", "mem_policy", "omp_runtime", "threads", "ipex")
# Ordered knobs: a move goes to the neighbouring values, doubling and halving first.
_ORDERED = ("ranks_per_numa_node", "global_batch", "dataloader_workers", "nnodes")
# ... except these, whose first move upwards is a jump to the largest value, then back down by
# halving: a larger global batch is faster per sample almost everywhere, so the far end is the
# likeliest leader and is one trial (and one quality check) away instead of one per doubling. At
# minute-long trials on the simulated Ice Lake, 32 -> 64 -> 128 did not fit a 30-minute budget;
# 32 -> 128 did (docs/search-at-scale.md). A far end rejected on quality is skipped, and the
# next move from the leader is the doubling.
_JUMP = ("global_batch",)


def preference(knob: str, choices: tuple[Any, ...], topology: Topology) -> tuple[Any, ...]:
    """The knob's choices, the one the hardware favours first."""
    prefer: tuple[Any, ...] = _PREFER.get(knob, ())
    if knob == "precision":   # the space offers only the native ones; prefer the fastest unit
        prefer = ("bf16", "fp16", "fp32") if topology.isa.bf16 else ("fp32",)
    elif knob == "omp_runtime":
        prefer = ("libiomp5", "libgomp") if topology.isa.vendor == "intel" else ("libgomp",)
    elif knob == "ranks_per_numa_node":
        prefer = (1,)   # one rank per NUMA node filling it: run_cpu's layout, the safe start
    elif knob == "nnodes":
        prefer = tuple(sorted(choices, reverse=True))   # every host the user gave
    first = [v for v in prefer if v in choices]
    return tuple(first) + tuple(v for v in choices if v not in first)


_OPINIONS = set(_PREFER) | {"precision", "omp_runtime", "ranks_per_numa_node", "nnodes"}


def first_guess(space, topology: Topology,
                launchable: Callable[[Params], bool] = lambda p: True) -> Params | None:
    """The launch the hardware points to: every knob at its preferred value, a knob without an
    opinion at the default launch's value when the space offers it, else its first choice. When
    that cannot run here (3 NUMA nodes cannot split a batch of 128 rank by rank), the first
    launchable change of one knob, in the descent's order; None when there is none."""
    default = Config()
    guess: Params = {}
    for knob, choices in space.knobs.items():
        if knob in _OPINIONS:
            guess[knob] = preference(knob, choices, topology)[0]
        else:
            dv = getattr(default, knob, None)
            guess[knob] = dv if dv in choices else choices[0]
    if guess.get("threads", 0) is not None and "threads" in space.knobs:
        guess["threads"] = _filling(space, guess)
    if _ranks(space, guess) * int(guess.get("nnodes") or 1) == 1 \
            and guess.get("backend") not in (None, default.backend) \
            and default.backend in space.knobs["backend"]:
        guess["backend"] = default.backend    # one rank talks to no one: no backend to prefer
    if launchable(guess):
        return guess
    for knob in knob_order(space):
        for value in preference(knob, space.knobs[knob], topology)[1:]:
            for cand in _variants(space, guess, knob, value):
                if launchable(cand):
                    return cand
    return None


def _ranks(space, guess: Params) -> int:
    """The ranks a guess launches on one host (per NUMA node x nodes)."""
    nodes = max(1, int(space.topology_names.get("numa_nodes", 1)))
    return int(guess.get("ranks_per_numa_node") or 1) * nodes


def _filling(space, guess: Params) -> Any:
    """Without `auto` in the space: the most threads a rank can have without oversubscribing
    (its share of the usable cores), so that the ranks fill the machine."""
    names = space.topology_names
    ranks = _ranks(space, guess)
    share = max(1, int(names.get("usable_cores", 1)) // ranks)
    counts = [c for c in space.knobs["threads"] if isinstance(c, int)]
    fitting = [c for c in counts if c <= share]
    return max(fitting) if fitting else min(counts, default=None)


def params_of(config: Config, space) -> Params | None:
    """`config` written as the space's knob values (a reference launch is stored as a config,
    not as sampled parameters), or None when one of its values is not a choice of the space."""
    nodes = max(1, int(space.topology_names.get("numa_nodes", 1)))
    out: Params = {}
    for knob, choices in space.knobs.items():
        v = getattr(config, knob, None)
        if knob == "ranks_per_numa_node" and v is None:
            v = config.nproc // (nodes * config.nnodes) or None
        if v not in choices:
            return None
        out[knob] = v
    return out


def moves(knob: str, value: Any, choices: tuple[Any, ...], topology: Topology) -> list[Any]:
    """The values a descent step tries for one knob, most promising first."""
    if knob in _ORDERED and all(isinstance(c, int) for c in choices) and isinstance(value, int):
        near = sorted(choices)
        i = near.index(value)
        out = [value * 2, value // 2, near[i + 1] if i + 1 < len(near) else None,
               near[i - 1] if i > 0 else None]
        if knob in _JUMP:
            out.insert(0, near[-1])
        return list(dict.fromkeys(v for v in out if v in choices and v != value))
    return [v for v in preference(knob, choices, topology) if v != value]


@dataclass
class Descent:
    """Cyclic coordinate descent: each call proposes one unmeasured, launchable neighbour of the
    leader, going round the knobs from where the last call stopped, so a knob that did not pay
    off is not tried again before the others. An ordered knob whose move made the new leader
    (1 -> 2 ranks per node won) is followed further first (2 -> 4), a line search along it."""
    topology: Topology
    cursor: int = 0
    last: tuple[str, Any, Params] | None = None    # (knob, value it left, proposal)

    def propose(self, space, leader: Params, measured: Callable[[Params], bool],
                launchable: Callable[[Params], bool]) -> Params | None:
        """The next neighbour to measure, or None when every one was measured or cannot run."""
        order = knob_order(space)
        line = self._line(order, leader, space)
        for step in range(len(order)):
            knob = order[(self.cursor + step) % len(order)]
            values = moves(knob, leader[knob], space.knobs[knob], self.topology)
            if line is not None and step == 0:
                values = [v for v in values if (v > leader[knob]) == line]
            for value in values:
                for cand in _variants(space, leader, knob, value):
                    if not measured(cand) and launchable(cand):
                        self.cursor = (self.cursor + step + 1) % len(order)
                        self.last = (knob, leader[knob], cand)
                        return cand
        return None

    def _line(self, order: tuple[str, ...], leader: Params, space) -> bool | None:
        """After an ordered knob's move made the leader, the descent keeps going the same way on
        that knob first (True: upwards); None otherwise. After a jump to a knob's far end that
        did not make the leader, the same knob comes next (its doubling: back towards the leader),
        before the other knobs take their turn."""
        if self._missed_jump(order, leader, space):
            self.cursor = order.index(self.last[0])
            return None
        if self.last is None or self.last[2] != leader or self.last[0] not in _ORDERED \
                or self.last[0] not in order:
            return None
        knob, before, _ = self.last
        self.cursor = order.index(knob)
        return leader[knob] > before

    def _missed_jump(self, order: tuple[str, ...], leader: Params, space) -> bool:
        if self.last is None or self.last[0] not in _JUMP or self.last[0] not in order:
            return False
        knob, before, cand = self.last
        return cand != leader and leader.get(knob) == before and \
            cand[knob] == max(space.knobs[knob]) and cand[knob] > before


def knob_order(space) -> tuple[str, ...]:
    listed = [k for k in DESCENT_ORDER if k in space.knobs]
    return tuple(listed + [k for k in space.knobs if k not in listed])


def _variants(space, leader: Params, knob: str, value: Any) -> list[Params]:
    """The move itself, and the same move with automatic threads: more ranks than a fixed
    thread count leaves room for would be ruled out, while auto refits the cores."""
    cand = {**leader, knob: value}
    out = [cand]
    if knob != "threads" and None in space.knobs.get("threads", ()) \
            and cand.get("threads") is not None:
        out.append({**cand, "threads": None})
    return out


class Guide:
    """The hardware's first guess, then (guide "descent") coordinate descent around the leader,
    until no neighbour is left: then the start-up draws and the sampler's model take over."""

    def __init__(self, mode: str, topology: Topology, key, ruled_out_fn,
                 rejected: Callable[[Config], bool] = lambda config: False):
        self.mode, self.topology, self.key, self.ruled_out = mode, topology, key, ruled_out_fn
        self.rejected = rejected
        self.descent = Descent(topology) if mode == "descent" else None
        self.guessed = mode == "none"

    def next(self, space, known: dict[str, Record], busy=()) -> dict[str, Any] | None:
        busy = set(busy)

        def measured(p: dict[str, Any]) -> bool:
            k = self.key(space.to_config(p))
            return k in known or k in busy

        def launchable(p: dict[str, Any]) -> bool:
            config = space.to_config(p)
            return self.ruled_out(config, space, self.topology) is None and \
                not self.rejected(config)

        if not self.guessed:
            self.guessed = True
            guess = first_guess(space, self.topology, launchable)
            if guess is not None and not measured(guess):
                return guess
        if self.descent is None:
            return None
        # the fastest configuration not rejected on quality, written in the space's knobs
        for rec in sorted((r for r in known.values() if r.feasible and r.throughput
                           and not self.rejected(r.config)),
                          key=lambda r: r.throughput, reverse=True):
            # as the plan runs it (a reference's automatic threads are a count in the space)
            lead = params_of(rec.config, space) or params_of(canonical(rec.config, self.topology),
                                                             space)
            if lead is not None:
                return self.descent.propose(space, lead, measured, launchable)
        return None
