"""The shared vocabulary of a trial's result (ground floor): the outcome names, the
`TrialResult` of one configuration and the `Evaluate` signature that produces it.

A result has three shapes on its way, no more: what each rank reports (the JSON dict the worker
writes), what a trial yields (`TrialResult`, which run/trial.py builds from the runner's
`RunResult`: the processes' exit codes, signals and CPU samples, and those reports), and what
the study stores (study/records.py's `Record`: the same TrialResult with its role and number).
The runner, the measurement, the search, quality and the study all speak it, so it sits below
them all.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

try:
    from enum import StrEnum
except ImportError:   # Python 3.10: the same behaviour, spelled out
    from enum import Enum

    class StrEnum(str, Enum):  # type: ignore[no-redef]
        """Members are their values: equal to, printed and stored as the plain strings."""
        __str__ = str.__str__
        __format__ = str.__format__


class Outcome(StrEnum):
    """How a trial ended. A failed trial is a result, not a crash: every launch ends in exactly
    one of these. The values are the strings stored on trials (user attr "outcome"), so studies
    written before this type read the same."""
    OK = "ok"
    CRASH = "crash"              # non-zero exit or killed by a signal
    OOM = "oom"                  # killed for memory (SIGKILL by the OOM killer, MemoryError, ...)
    TIMEOUT = "timeout"          # ran past the plan's timeout and was torn down
    UNAVAILABLE = "unavailable"  # the communication backend (or another facility) is not there
    BAD_CONFIG = "bad_config"    # what the worker found in force differs from the plan
    # the user's workload is broken (import error, bad spec, no metric)
    WORKLOAD_ERROR = "workload_error"
    INFEASIBLE = "infeasible"    # ruled out before launch; never run
    INTERRUPTED = "interrupted"  # the search itself was stopped (Ctrl-C, SIGTERM, kill -9)


OUTCOMES = tuple(Outcome)

# The phases of a training step, as the worker's timers and a script's report_metrics(split=...)
# name them (measure/split.py does the arithmetic on them): waiting for the batch, copying it to
# the device, forward and backward, waiting on the all-reduce, the optimizer.
PHASES = ("data", "copy", "compute", "allreduce", "optimizer")


@dataclass(frozen=True, kw_only=True)
class TrialResult:
    """What evaluating one configuration gave: the one result type of a trial, from the runner
    (or a replayed landscape) through the search to the study and back (study/records.py stores
    it as the trial's user attributes, under these field names, and reads it back).

    The runner fills the outcome and the measurement; the search adds its judgement of the
    configuration's quality (`accuracy`, `math_class`, `quality*`) before storing it. A field
    left at its default is not known for this trial (and not stored).
    """
    # an Outcome; a str, since a study written by a later version may hold one not known here
    outcome: str
    reason: str = ""                         # why it did not end ok (clipped when stored)
    throughput: float | None = None          # samples/s (a script's score); stored as values[0]
    accuracy: float | None = None            # held-out quality: the run's; once stored, as judged
    seconds: float = 0.0                     # wall time the evaluation cost (budgeting)
    mode: str | None = None                  # "throughput" | "accuracy"; None: not launched
    cpu_share: float | None = None           # rank 0's CPU time / (window x threads): < 1 is busy
    # The trial cores' capacity over the timed window (measure/contention.py): used by the
    # trial's own processes, and taken by processes outside them (over DISTURBED_SHARE: disturbed)
    own_share: float | None = None
    outside_share: float | None = None
    log_tail: str = ""                       # the ranks' last output, for a failed run
    # The timed window of an ok run (measure.stats.aggregate reads it from the ranks' reports)
    step_median_s: float | None = None       # rank 0's median step time
    step_iqr_s: float | None = None          # ... and its IQR
    throughput_iqr: float | None = None      # IQR of per-step global throughput
    # global samples per step / median step time: robust to a burst of contention that the
    # window's average absorbs
    median_throughput: float | None = None
    window_s: float | None = None            # rank 0's timed window
    samples: int | None = None               # global samples trained in it
    startup_s: float | None = None           # launch -> first training step, slowest rank
    timed_share: float | None = None         # timed window / wall time
    timed_steps: int | None = None           # steps in the timed window
    # Why the timed window ended before its length: the run was clearly losing to the leader
    # (measure/early_stop.py). Its throughput is an estimate from fewer windows; it never leads.
    stopped_early: str | None = None
    peak_rss_mb: tuple[int | None, ...] = ()  # by rank
    # Where rank 0's step time went (measure/split.StepSplit's stored form: seconds per step
    # by phase), and the ceiling: the same step with its batches resident, timed after the window
    # when asked (samples/s), with its own split
    split: dict[str, Any] | None = None
    ceiling: float | None = None
    ceiling_split: dict[str, Any] | None = None
    # What the run cost before its timed window, by stage (seconds; measure/split.fixed_costs):
    # a fresh launch's process start, imports, process group, model and warm-up, or a window of
    # a running worker's rebuild and warm-up
    fixed: dict[str, float] | None = None
    # torch.compile (issue 59): what compiling cost this launch once, apart from the steady rate
    # that follows it (the timed window starts after it): the first compiled steps' time less the
    # same steps' eager estimate, in seconds; whether inductor's cache was "cold" or "warm"; and
    # the recompiles the run met (a changed shape, a short last batch). None: not compiled.
    compile_s: float | None = None
    compile_cache: str | None = None
    recompiles: int | None = None
    # A quality ("accuracy") run
    seed: int | None = None                  # its seed
    curve: tuple[tuple[int, float], ...] = ()  # (samples trained, held-out quality)
    gns: dict[str, Any] | None = None        # squared gradient norms (worker.gradnoise)
    # Script mode
    metric_source: str | None = None         # where the score came from (measure.script.SOURCES)
    metric_shown: str = ""                   # the score in the script's own unit, as printed
    observed: tuple[dict[str, Any], ...] = ()  # each rank's processes as sampled from outside
    unacted: tuple[str, ...] = ()            # planned knobs the processes did not show in force
    overridden: dict[str, str] = field(default_factory=dict)  # {knob: why} of those knobs
    # The search's judgement, added before the result is stored
    math_class: str | None = None            # what the configuration's training math is
    quality: str | None = None               # accepted | rejected | pending | quality run failed
    quality_sd: float | None = None          # sd of the class's seeded qualities
    quality_n: int | None = None             # how many seeds they are
    quality_verdict: str | None = None       # the gate's verdict, as text
    reused_from: int | None = None           # a repeat: the trial whose measurement it mirrors
    # throughput over the highest ceiling its math class has (measure/split.of_ceiling), when
    # it was stored
    of_ceiling: float | None = None
    note: str = ""                           # what happened in teardown (RunResult.notes)
    # files in the trial folder that were not the launch's own, ignored (run/trial_files.py)
    ignored_files: int = 0

    @property
    def ok(self) -> bool:
        return self.outcome == Outcome.OK


# (config, "throughput" | "accuracy", seed=0): "accuracy" is one seeded quality run
Evaluate = Callable[..., TrialResult]


@runtime_checkable
class SideBySide(Protocol):
    """An Evaluate that can also run one configuration's seeded runs at the same time, on
    disjoint hosts (run/evaluate.LiveEvaluator across hosts)."""

    def lanes(self, config: Any) -> int: ...

    def at_once(self, config: Any, mode: str, seeds: list[int],
                samples: int | None = None) -> list[TrialResult]: ...
