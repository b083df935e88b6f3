"""Which planned knobs a rank's processes did not act on, judged from what was seen from outside
(observe.py) against the plan (pure). Script mode and `autotune launch` report them."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..plan.launch_plan import LaunchPlan, RankExpect
from ..probe.parse import format_cpulist
from ..probe.procfs import memory_bound_to, memory_placed
from .observe import RankObservation


@dataclass(frozen=True, kw_only=True)
class Unacted:
    """A planned knob the rank's processes do not show in force."""
    knob: str        # the Config knob that did not act ("threads", "binding", "allocator", ...)
    rank: int
    message: str


def compare(expected: "Sequence[RankExpect] | LaunchPlan",
            observations: Sequence[RankObservation]) -> tuple[Unacted, ...]:
    """Every planned knob a rank's processes do not show in force, one entry per knob and rank
    (`expected`: what each rank must see, or the LaunchPlan holding it).

    Only what can be seen from outside is judged: more busy threads than planned (fewer can just
    be a model too small to split), a different affinity, other libraries mapped, another memory
    policy where it was readable. Precision and in-process knobs are the script's business.
    """
    if isinstance(expected, LaunchPlan):
        expected = expected.request.ranks
    # A rank of a multi-rank job also keeps its collective's I/O thread busy (gloo all-reduces a
    # step's gradients on its own thread: seen at 2 busy threads with threads=1 on a quiet
    # machine), so one thread more than planned is not yet the script's own thread count.
    comm = 1 if len(expected) > 1 else 0
    out: list[Unacted] = []
    for obs in observations:
        if obs.rank >= len(expected):
            continue
        exp, r = expected[obs.rank], obs.rank
        if exp.threads is not None and obs.busy_threads > exp.threads + comm:
            out.append(Unacted(knob="threads", rank=r, message=(
                f"threads={exp.threads} planned; rank {r} ran {obs.busy_threads} busy threads: "
                "the script sets its own thread count")))
        if exp.cpus is not None and obs.affinity and set(obs.affinity) != set(exp.cpus):
            out.append(Unacted(knob="binding", rank=r, message=(
                f"cpus {format_cpulist(exp.cpus)} planned; rank {r} ran on cpus "
                f"{format_cpulist(obs.affinity)}: the script sets its own CPU affinity")))
        if obs.libraries:   # nothing mapped seen: the process ended before a sample
            alloc, omp = obs.allocator, obs.omp_runtime
            if exp.allocator is not None and alloc != exp.allocator:
                out.append(Unacted(knob="allocator", rank=r, message=(
                    f"allocator={exp.allocator} planned; rank {r} mapped {alloc}: the script or "
                    "its launcher sets its own LD_PRELOAD")))
            if exp.omp_runtime is not None and omp != exp.omp_runtime:
                out.append(Unacted(knob="omp_runtime", rank=r, message=(
                    f"omp_runtime={exp.omp_runtime} planned; rank {r} mapped {omp}: the script "
                    "or its launcher sets its own LD_PRELOAD")))
        if exp.mem_policy is not None and obs.mempolicy is not None and \
                not memory_placed(exp.mem_policy, obs.mempolicy):
            out.append(Unacted(knob="mem_policy", rank=r, message=(
                f"memory policy {exp.mem_policy} planned; rank {r} ran with {obs.mempolicy}: the "
                "script sets its own memory policy")))
        if exp.mem_node is not None and obs.mempolicy is not None and \
                not memory_bound_to(exp.mem_node, obs.mempolicy, None):
            out.append(Unacted(knob="binding", rank=r, message=(
                f"memory on node {exp.mem_node} planned; rank {r} ran with memory policy "
                f"{obs.mempolicy}: the script sets its own memory policy")))
    return tuple(out)


def unacted_knobs(expected: "Sequence[RankExpect] | LaunchPlan",
                  observations: Sequence[RankObservation]) -> list[str]:
    """The human-readable messages of `compare` (what a trial reports and stores)."""
    return [u.message for u in compare(expected, observations)]


def overridden_knobs(unacted: Sequence[Unacted]) -> tuple[str, ...]:
    """Knob names that did not act, each once, in the order first seen."""
    return tuple(dict.fromkeys(u.knob for u in unacted))
