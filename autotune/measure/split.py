"""Where a training step's time goes, and how far a launch is from the workload's own ceiling
(pure: the arithmetic on what the worker's timers measured; worker/phases.py owns the timers).

A step is split into the phases of PHASES: waiting for the batch, copying it to the device,
forward and backward, waiting on the all-reduce after backward (told apart where DDP's comm hook
could mark the last bucket's launch; otherwise it stays inside compute) and the optimizer. Each
phase falls in one of three parts a knob can attack (`Bottleneck`): the data pipeline, the
computation, the communication. The ceiling is the same step with its batches already resident
(on the GPU for GPUs, pre-made in memory for CPUs): what the device does for this workload and
math with nothing to wait for. "N% of the ceiling" is a launch's throughput over it.

A compiled launch (torch.compile, issue 59) is split the same way: data, copy and the optimizer
are timed around the compiled model as for eager, so what its fused kernels do shows as compute,
and the model is compiled inside DDP, whose reducer stays eager, so the comm hook tells its
all-reduce apart too (worker/phases.py). What the split cannot separate under compile is forward
from backward (neither can it for eager), nor kernels inductor fused across them. Its ceiling
is timed the same way, and as compiling keeps the default's math, a compiled launch's ceiling is
its class's: where compiling is offered, the first compiled launch of a class times it
(search/trials.py), and every launch of the class is a share of the highest one, capped at "at
the ceiling".

This module is the one owner of those names: the worker writes them, the study stores them, the
report, the summary and the guide read them through here and never read raw timers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..result import PHASES, StrEnum
PHASE_WORDS = {"data": "data", "copy": "copy", "compute": "compute", "allreduce": "all-reduce",
               "optimizer": "optimizer", "other": "other"}


class Bottleneck(StrEnum):
    """The part of a step a knob can attack (a space's knob says which one it addresses)."""
    DATA = "data"                     # waiting for the batch and copying it to the device
    COMPUTE = "compute"               # forward, backward, optimizer
    COMMUNICATION = "communication"   # waiting on the all-reduce


PART_OF = {"data": Bottleneck.DATA, "copy": Bottleneck.DATA, "compute": Bottleneck.COMPUTE,
           "optimizer": Bottleneck.COMPUTE, "allreduce": Bottleneck.COMMUNICATION}
# What a summary says a launch waits on, by part.
WAITS_ON = {Bottleneck.DATA: "waits on data", Bottleneck.COMPUTE: "computes",
            Bottleneck.COMMUNICATION: "waits on the all-reduce"}


@dataclass(frozen=True, kw_only=True)
class StepSplit:
    """One launch's step, per phase: mean seconds per timed step (rank 0's)."""
    seconds: Mapping[str, float]
    step_s: float                     # mean step time; what the phases do not cover is "other"
    source: str = "worker"            # "worker" (its timers) | "script" (report_metrics)

    @property
    def other_s(self) -> float:
        return max(0.0, self.step_s - sum(self.seconds.values()))

    def share(self, phase: str) -> float:
        s = self.other_s if phase == "other" else self.seconds.get(phase, 0.0)
        return s / self.step_s if self.step_s > 0 else 0.0

    def part_share(self, part: Bottleneck) -> float:
        return sum(self.share(p) for p in self.seconds if PART_OF.get(p) == part)

    def parts(self) -> list[tuple[Bottleneck, float]]:
        """The parts by their share of the step, largest first."""
        return sorted(((b, self.part_share(b)) for b in Bottleneck), key=lambda t: -t[1])

    @property
    def bottleneck(self) -> Bottleneck:
        return self.parts()[0][0]

    def describe(self) -> str:
        """'step 41.2 ms: data 62%, copy 3%, compute 30%, all-reduce 2%, optimizer 3%'."""
        shown = [p for p in (*PHASES, "other") if p == "other" or p in self.seconds]
        parts = ", ".join(f"{PHASE_WORDS[p]} {self.share(p):.0%}" for p in shown
                          if self.share(p) >= 0.005)
        return f"step {self.step_s * 1000:.1f} ms: {parts}"

    def brief(self) -> str:
        """'data 62%, compute 30%': the phases of 5% or more, for a trial's one line."""
        return ", ".join(f"{PHASE_WORDS[p]} {self.share(p):.0%}" for p in (*PHASES, "other")
                         if self.share(p) >= 0.05)

    def to_json(self) -> dict[str, Any]:
        return {"step_s": round(self.step_s, 6), "source": self.source,
                **{p: round(s, 6) for p, s in self.seconds.items()}}


def split_from(stored: Mapping[str, Any] | None) -> StepSplit | None:
    """A split from its stored form (StepSplit.to_json); None when absent or unreadable."""
    if not isinstance(stored, Mapping):
        return None
    try:
        step = float(stored["step_s"])
        seconds = {p: float(stored[p]) for p in PHASES if p in stored}
    except (KeyError, TypeError, ValueError):
        return None
    if step <= 0 or not seconds or any(s < 0 for s in seconds.values()):
        return None
    return StepSplit(seconds=seconds, step_s=step, source=str(stored.get("source", "worker")))


def split_of_report(phases: Mapping[str, Any] | None, steps: int, step_s: float,
                    source: str = "worker") -> StepSplit | None:
    """From a rank's report: `phases` holds each phase's seconds summed over `steps` steps whose
    mean time is `step_s` (a script's report_metrics gives one step's: steps=1)."""
    if not isinstance(phases, Mapping) or steps < 1:
        return None
    try:
        per = {p: float(phases[p]) / steps for p in PHASES if p in phases}
    except (TypeError, ValueError):
        return None
    return split_from({"step_s": step_s, "source": source, **per})


def highest_ceilings(measured: Iterable[tuple[str, float | None]]) -> dict[str, float]:
    """The highest ceiling of each math class, from (class, ceiling) of the launches measured
    (a CPU launch faster than the one a ceiling was taken on raises its class's)."""
    out: dict[str, float] = {}
    for cls, ceiling in measured:
        if ceiling:
            out[cls] = max(out.get(cls, 0.0), ceiling)
    return out


def of_ceiling(throughput: float | None, ceiling: float | None) -> float | None:
    """A launch's throughput as a share of its math class's ceiling (None: either unknown)."""
    if not throughput or not ceiling or ceiling <= 0:
        return None
    return throughput / ceiling


def ceiling_words(share: float | None) -> str:
    """'81% of the ceiling' (a launch above a ceiling measured on a slower launch of its class
    reads 'at the ceiling')."""
    if share is None:
        return ""
    return "at the ceiling" if share >= 0.995 else f"{share:.0%} of the ceiling"


def diagnosis(who: str, split: StepSplit | None, share: float | None, *, device: str,
              workload: str, math: str) -> str:
    """The summary's sentence for one launch, e.g. 'the recommendation reaches 81% of what this
    GPU does for resnet50 in bf16; 15% of its step waits on data'. Says what it cannot know."""
    if share is not None:
        head = f"{who} reaches {min(share, 1.0):.0%} of what this {device} does for {workload} " \
               f"in {math}"
    else:
        head = f"{who}: no ceiling measured for {workload} in {math}"
    if split is None:
        return head + "; its step was not split"
    part, part_share = split.bottleneck, split.part_share(split.bottleneck)
    data = split.part_share(Bottleneck.DATA)
    tail = f"; {part_share:.0%} of its step {WAITS_ON[part]}"
    if part != Bottleneck.DATA and data >= 0.05:
        tail += f", {data:.0%} waits on data"
    return head + tail


def ran_warm(fixed: Mapping[str, float] | None) -> bool:
    """Whether a run's fixed costs (fixed_costs) are a window's of a launch already running
    (it waited for its request), not a start's."""
    return bool(fixed) and "wait" in fixed


def fixed_costs(report: Mapping[str, Any], launched_at: float) -> dict[str, float] | None:
    """What a rank's run cost before its timed window, by stage, from its report's timestamps
    (seconds). A fresh launch: start (spawn, binding tool), imports (interpreter and torch),
    group (device and process group), model (workload, model, DDP, pipeline), warmup. A later
    window of a running worker: model (kept or rebuilt) and warmup."""
    stages = (("start", "started_at"), ("imports", "torch_at"), ("group", "group_at"),
              ("model", "model_at"), ("warmup", "timed_start_at"))
    if report.get("request_seen_at"):
        stages = (("wait", "request_seen_at"), ("model", "model_at"),
                  ("warmup", "timed_start_at"))
    out: dict[str, float] = {}
    prev = launched_at
    for name, key in stages:
        at = report.get(key)
        if not isinstance(at, (int, float)) or not prev:
            return out or None
        out[name] = round(max(0.0, float(at) - prev), 3)
        prev = float(at)
    return out
