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

Bottleneck first (issue 43): the guide reads where the leader's step goes (its split, else the
default launch's: measure/split.py) and, when the step waits on data or on the all-reduce, moves
first the knobs that address that part (config.Knob.addresses, or a space file's `addresses:`):
the DataLoader's workers and pinned memory for data, the backend and the ranks for the
all-reduce. A compute-bound step keeps the order below, measured on CPUs (docs/search-at-scale.md).
A data-bound default launch also makes the first guess feed the step: the most workers, pinned
memory.

Generic over knobs: a knob this module has no opinion on (one a space adds, a backend's own)
keeps the default launch's value in the guess and is varied last by the descent, in the order
the space lists its choices.
"""
from __future__ import annotations

from typing import Any, Callable

from ..config import Config
from ..measure.split import Bottleneck, split_from
from ..plan.placement import canonical
from ..probe.topology import Topology
from ..study.records import Record
# DESCENT_ORDER and moves are read from here too (tests, benchmarks)
from .descent import (_PREFER, DESCENT_ORDER, Descent, addresses, knob_order,  # noqa: F401
                      moves, preference, _variants)

Params = dict[str, Any]

_OPINIONS = set(_PREFER) | {"precision", "omp_runtime", "ranks_per_numa_node", "nnodes"}


def first_guess(space, topology: Topology,
                launchable: Callable[[Params], bool] = lambda p: True,
                bottleneck: str | None = None) -> Params | None:
    """The launch the hardware points to: every knob at its preferred value, a knob without an
    opinion at the default launch's value when the space offers it, else its first choice. When
    that cannot run here (3 NUMA nodes cannot split a batch of 128 rank by rank), the first
    launchable change of one knob, in the descent's order; None when there is none."""
    default = Config()
    guess: Params = {}
    feed = bottleneck == Bottleneck.DATA
    for knob, choices in space.knobs.items():
        if knob in _OPINIONS or (feed and addresses(space, knob) == (Bottleneck.DATA.value,)):
            guess[knob] = preference(knob, choices, topology, feed)[0]
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
    for knob in knob_order(space, bottleneck):
        for value in preference(knob, space.knobs[knob], topology, feed)[1:]:
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
    (its share of the usable cores, less its DataLoader workers'), so that the ranks fill the
    machine."""
    names = space.topology_names
    ranks = _ranks(space, guess)
    workers = int(guess.get("dataloader_workers") or 0)
    share = max(1, int(names.get("usable_cores", 1)) // ranks - workers)
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
            guess = first_guess(space, self.topology, launchable,
                                bottleneck=_bottleneck_of(_default_of(known)))
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
                where = _bottleneck_of(rec) or _bottleneck_of(_default_of(known))
                return self.descent.propose(space, lead, measured, launchable, where)
        return None


def _default_of(known: dict[str, Record]) -> Record | None:
    from ..study.records import Role
    return next((r for r in known.values() if r.role == Role.DEFAULT), None)


def _bottleneck_of(rec: Record | None) -> str | None:
    """Where a measured launch's step goes (None: not split, or not measured)."""
    split = split_from(rec.result.split) if rec is not None else None
    return split.bottleneck.value if split is not None else None
