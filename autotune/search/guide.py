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

Same math first (issue 51): when the default launch waits on data, a faster launch of its own
math is likely (DataLoader workers, threads, ranks at the same global batch), and it risks no
accuracy. The first guess then keeps the default's math (whatever its quality class reads:
precision, global batch, ranks beside BatchNorm) and feeds the step. On CPUs, where workers and
compute threads share the cores and their split is a measurement, the guide then moves each knob
that addresses data once around the fastest launch of the default's math (workers against
threads, binding and ranks), staying in that math. Only then comes the hardware's whole guess
(bf16 where native) and the descent. So a user gets the win that risks no accuracy at least as
early as one that does, and a math-changing class cannot lead on speed before it is measured. On
a GPU this costs one trial: the simulated data-bound H200 reaches 95% of its best in 5 trials,
not 4 (docs/benchmarks.md, "A data-bound GPU machine").

Generic over knobs: a knob this module has no opinion on (one a space adds, a backend's own)
keeps the default launch's value in the guess and is varied last by the descent, in the order
the space lists its choices.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ..config import Config
from ..errors import ConfigError
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
                bottleneck: str | None = None,
                class_of: Callable[[Config], str] | None = None,
                base: Config | None = None) -> Params | None:
    """The launch the hardware points to: every knob at its preferred value, a knob without an
    opinion at the default launch's value when the space offers it, else its first choice. When
    that cannot run here (3 NUMA nodes cannot split a batch of 128 rank by rank), the first
    launchable change of one knob, in the descent's order; None when there is none. A step that
    waits on data (`bottleneck`) is fed: the most DataLoader workers, threads fitted to the
    cores they leave, and with `class_of` the math of `base` (the default launch) kept."""
    default = Config()
    guess: Params = {}
    feed = bottleneck == Bottleneck.DATA
    for knob, choices in space.knobs.items():
        if knob in _OPINIONS or (feed and addresses(space, knob) == (Bottleneck.DATA.value,)):
            guess[knob] = preference(knob, choices, topology, feed)[0]
        else:
            dv = getattr(default, knob, None)
            guess[knob] = dv if dv in choices else choices[0]
    if feed and class_of is not None:
        guess = same_math(space, guess, base or default, class_of)
    if "threads" in space.knobs and (guess.get("threads", 0) is not None or
                                     (feed and guess.get("dataloader_workers"))):
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


def same_math(space, guess: Params, base: Config, class_of: Callable[[Config], str]) -> Params:
    """`guess` with every knob that changes its quality class (precision, global batch, ranks
    beside BatchNorm...) back at `base`'s value where the space offers it."""
    out = dict(guess)
    for knob, choices in space.knobs.items():
        value = getattr(base, knob, None)
        if value not in choices or out[knob] == value:
            continue
        back = {**out, knob: value}
        try:
            if class_of(space.to_config(back)) != class_of(space.to_config(out)):
                out = back
        except ConfigError:   # not a launch at all: the guess's own repair finds one
            continue
    return out


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
    until no neighbour is left: then the start-up draws and the sampler's model take over.
    With `class_of` (the quality classes), a default launch that waits on data gets its own
    math fed first (the module's "same math first")."""

    def __init__(self, mode: str, topology: Topology, key, ruled_out_fn,
                 rejected: Callable[[Config], bool] = lambda config: False,
                 class_of: Callable[[Config], str] | None = None):
        self.mode, self.topology, self.key, self.ruled_out = mode, topology, key, ruled_out_fn
        self.rejected, self.class_of = rejected, class_of
        self.descent = Descent(topology) if mode == "descent" else None
        self.guessed = mode == "none"
        self.feeding: Feeding | None = None
        self.later: Params | None = None    # the hardware's guess, after the same math's

    def _guesses(self, space, default: Record | None, known: dict[str, Record],
                 launchable: Callable[[Params], bool]) -> Params | None:
        """The first guess. When the default launch waits on data: the guess in its own math
        that feeds the step first, then (on CPUs, where workers and compute threads share the
        cores) a turn of each data knob in that math, then the hardware's whole guess."""
        where = _bottleneck_of(default)
        guess = _eager_if_lost(first_guess(space, self.topology, launchable, bottleneck=where),
                               known, space, launchable)
        if where != Bottleneck.DATA or self.class_of is None or default is None:
            return guess
        self.later = guess
        if self.descent is not None and default.config.device == "cpu":
            self.feeding = Feeding(self.topology, space, default.config, self.class_of)
        return _eager_if_lost(first_guess(space, self.topology, launchable, bottleneck=where,
                                          class_of=self.class_of, base=default.config),
                              known, space, launchable)

    def next(self, space, known: dict[str, Record], busy=()) -> dict[str, Any] | None:
        busy = set(busy)

        def measured(p: dict[str, Any]) -> bool:
            k = self.key(space.to_config(p))
            return k in known or k in busy

        def launchable(p: dict[str, Any]) -> bool:
            config = space.to_config(p)
            return self.ruled_out(config, space, self.topology) is None and \
                not self.rejected(config)

        default = _default_of(known)
        if not self.guessed:
            self.guessed = True
            guess = self._guesses(space, default, known, launchable)
            if guess is not None and not measured(guess):
                return guess
        if self.feeding is not None:
            fed = self.feeding.propose(space, known, measured, launchable)
            if fed is not None:
                return fed
            self.feeding = None   # its turns are over: the whole space from here
        later, self.later = self.later, None
        if later is not None and not measured(later) and launchable(later):
            return later
        if self.descent is None:
            return None
        # the fastest configuration not rejected on quality, written in the space's knobs
        for rec in sorted((r for r in known.values() if r.feasible and r.throughput
                           and not self.rejected(r.config)),
                          key=lambda r: r.throughput, reverse=True):
            lead = _params(rec.config, space, self.topology)
            if lead is not None:
                where = _bottleneck_of(rec) or _bottleneck_of(default)
                return self.descent.propose(space, lead, measured, launchable, where)
        return None


class Feeding:
    """Same math first: the knobs that address data (DataLoader workers, threads, binding,
    ranks), each moved once around the fastest launch of the default's math, and only to
    launches of that math; then the guide's descent takes over."""

    def __init__(self, topology: Topology, space, base: Config,
                 class_of: Callable[[Config], str]) -> None:
        self.topology, self.base_class, self.class_of = topology, class_of(base), class_of
        self.knobs = tuple(k for k in knob_order(space, Bottleneck.DATA)
                           if Bottleneck.DATA.value in addresses(space, k))
        self.turns = len(self.knobs)
        self.descent = Descent(topology)

    def propose(self, space, known: dict[str, Record], measured: Callable[[Params], bool],
                launchable: Callable[[Params], bool]) -> Params | None:
        if self.turns <= 0 or not self.knobs:
            return None
        same = [r for r in known.values() if r.feasible and r.throughput
                and self.class_of(r.config) == self.base_class]
        lead = next((p for r in sorted(same, key=lambda r: r.throughput, reverse=True)
                     if (p := _params(r.config, space, self.topology)) is not None), None)
        if lead is None:
            return None
        view = dataclasses.replace(space, knobs={k: space.knobs[k] for k in self.knobs})
        proposal = self.descent.propose(
            view, lead, measured,
            lambda p: launchable(p) and self.class_of(space.to_config(p)) == self.base_class,
            Bottleneck.DATA)
        self.turns -= 1
        return proposal


def _params(config: Config, space, topology: Topology) -> Params | None:
    """`config` in the space's knobs, as the plan runs it (a reference's automatic threads are
    a count in the space)."""
    return params_of(config, space) or params_of(canonical(config, topology), space)


def compile_lost(known: dict[str, Record]) -> bool:
    """Whether the default launch compiled ran slower than the default launch, both measured:
    the one measurement of compiling this workload the guess has (on the 2-core Zen 5 the
    built-in transformer compiled ran 0.79-0.86x eager, the cnn 1.18x; docs/benchmarks.md)."""
    from ..study.records import Role
    ran = {r.role: r.throughput for r in known.values()
           if r.role in (Role.DEFAULT, Role.DEFAULT_COMPILED) and r.throughput}
    return len(ran) == 2 and ran[Role.DEFAULT_COMPILED] < ran[Role.DEFAULT]


def _eager_if_lost(guess: Params | None, known: dict[str, Record], space,
                   launchable: Callable[[Params], bool]) -> Params | None:
    """The guess eager where compiling lost on the default launch (the descent still measures
    the compiled side around the leader: compiling a tuned launch can pay where it did not on
    the default); as it was when that cannot run."""
    if guess is None or not guess.get("compile") or not compile_lost(known):
        return guess
    eager = {**guess, "compile": False}
    return eager if False in space.knobs.get("compile", ()) and launchable(eager) else guess


def _default_of(known: dict[str, Record]) -> Record | None:
    from ..study.records import Role
    return next((r for r in known.values() if r.role == Role.DEFAULT), None)


def _bottleneck_of(rec: Record | None) -> str | None:
    """Where a measured launch's step goes (None: not split, or not measured)."""
    split = split_from(rec.result.split) if rec is not None else None
    return split.bottleneck.value if split is not None else None
