"""The coordinate descent around the leader, knob by knob (pure): which knobs it moves in which
order (the measured bottleneck's first), which values each move tries, and the hardware's
preferred value of each knob (search/guide.py's first guess uses the same preferences).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..config import KNOB_TABLE
from ..measure.split import Bottleneck
from ..probe.topology import Topology

Params = dict[str, Any]

# Which value to try first, knob by knob; values a space does not offer are skipped.
_PREFER: dict[str, tuple[Any, ...]] = {
    "threads": (None,),                       # auto: a bound rank takes all of its cores
    "binding": ("numactl", "taskset", "numactl_smt", "taskset_smt", "none"),
    "allocator": ("tcmalloc", "jemalloc", "default"),
    "backend": ("ccl", "gloo"),               # oneCCL's shared-memory transport, where found
    "ipex": ("off",),                         # a library's own rewrite: measured, not assumed
    # PyTorch 2's first lever, the default's math: 1.70x on the default launch and 1.23x on the
    # tuned one on the 2-core Zen 5 (issue 59). Guessed on, and the descent's second move takes
    # it off around the leader, so a short search measures both sides early. Where the default
    # launch compiled lost to it (the built-in transformer: 0.86x), the guess is eager and the
    # descent's move puts it on (guide._eager_if_lost).
    "compile": (True, False),
    # HBM in flat mode is there to be used (Intel's Xeon Max guide: numactl --preferred to the
    # HBM node); preferred falls back to DRAM when it is full, so it is a safe first guess
    "mem_policy": ("preferred_fast", "local"),
}
# The descent's knob order: the global batch first (a larger one amortises each step's fixed cost
# and all-reduce over more samples, the largest effect in the model; it changes the math, so the
# quality gate judges it, and the guess keeps the default's), then the layout (how much of the
# machine works), the work per sample, the rest of the launch. Knobs not listed follow.
DESCENT_ORDER = ("global_batch", "compile", "nnodes", "ranks_per_numa_node", "precision", "backend",
                 "allocator", "binding", "mem_policy", "omp_runtime", "threads", "ipex")
# Ordered knobs: a move goes to the neighbouring values, doubling and halving first.
_ORDERED = ("ranks_per_numa_node", "global_batch", "dataloader_workers", "nnodes")
# ... except these, whose first move upwards is a jump to the largest value, then back down by
# halving: a larger global batch is faster per sample almost everywhere, so the far end is the
# likeliest leader and is one trial (and one quality check) away instead of one per doubling. At
# minute-long trials on the simulated Ice Lake, 32 -> 64 -> 128 did not fit a 30-minute budget;
# 32 -> 128 did (docs/search-at-scale.md). A far end rejected on quality is skipped, and the
# next move from the leader is the doubling.
# The DataLoader's workers jump too: a starving step wants as many as the cores allow, and halving
# back finds where more stop paying.
_JUMP = ("global_batch", "dataloader_workers")
# The knobs that set how many ranks run (each makes its own share of a step's batch).
_RANKS = ("ranks_per_numa_node", "nproc", "nnodes")


def addresses(space, knob: str) -> tuple[str, ...]:
    """The parts of a step `knob` speeds up: the space file's word, else the knob table's."""
    declared = getattr(space, "addresses", None) or {}
    if knob in declared:
        return tuple(declared[knob])
    table = KNOB_TABLE.get(knob)
    return table.addresses if table is not None else (Bottleneck.COMPUTE.value,)


def preference(knob: str, choices: tuple[Any, ...], topology: Topology,
               feed: bool = False) -> tuple[Any, ...]:
    """The knob's choices, the one the hardware favours first; `feed`: the step waits on data,
    and a knob of the data pipeline prefers its most (the most workers, pinned memory)."""
    prefer: tuple[Any, ...] = _PREFER.get(knob, ())
    if feed and KNOB_TABLE.get(knob) is not None and \
            KNOB_TABLE[knob].addresses == (Bottleneck.DATA.value,):
        prefer = (True,) if KNOB_TABLE[knob].kind == "bool" else tuple(sorted(choices,
                                                                              reverse=True))
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
    bottleneck: str | None = None                   # the one the order was last made for

    def propose(self, space, leader: Params, measured: Callable[[Params], bool],
                launchable: Callable[[Params], bool],
                bottleneck: str | None = None) -> Params | None:
        """The next neighbour to measure, or None when every one was measured or cannot run.
        `bottleneck`: where the leader's step goes; its knobs come first."""
        if bottleneck != self.bottleneck:   # a new order: start from its first knob
            self.bottleneck, self.cursor = bottleneck, 0
        order = knob_order(space, bottleneck)
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


def knob_order(space, bottleneck: str | None = None) -> tuple[str, ...]:
    """DESCENT_ORDER, then the space's other knobs; when the step waits on data or on the
    all-reduce, the knobs that address only that part first, then those that address it among
    others, then the rest."""
    listed = [k for k in DESCENT_ORDER if k in space.knobs]
    order = listed + [k for k in space.knobs if k not in listed]
    if bottleneck in (None, Bottleneck.COMPUTE):
        return tuple(order)
    only = [k for k in order if addresses(space, k) == (bottleneck,)]
    among = [k for k in order if k not in only and bottleneck in addresses(space, k)]
    return tuple(only + among + [k for k in order if k not in only and k not in among])


def _variants(space, leader: Params, knob: str, value: Any) -> list[Params]:
    """The move itself, and the same move with automatic threads: more ranks than a fixed
    thread count leaves room for would be ruled out, while auto refits the cores. More ranks
    than the leader's DataLoader workers leave cores for: the same moves with fewer workers
    each (the ranks share the workers' cores out), the most first."""
    cand = {**leader, knob: value}
    out = [cand]
    if knob != "threads" and None in space.knobs.get("threads", ()) \
            and cand.get("threads") is not None:
        out.append({**cand, "threads": None})
    workers = cand.get("dataloader_workers") or 0
    if knob in _RANKS and workers:
        fewer = sorted((w for w in space.knobs.get("dataloader_workers", ()) if w < workers),
                       reverse=True)
        out += [{**c, "dataloader_workers": w} for w in fewer for c in list(out)]
    return out


