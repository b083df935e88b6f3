"""How a trial ended, and what it gave: the outcome names, the runner's `RunResult`, and the
`Evaluation` of one configuration that the search, verification and the study consume.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

# A failed trial is a result, not a crash: every launch ends in exactly one of these.
OK = "ok"
CRASH = "crash"              # non-zero exit or killed by a signal
OOM = "oom"                  # killed for memory (SIGKILL by the OOM killer, MemoryError, ...)
TIMEOUT = "timeout"          # ran past the plan's timeout and was torn down
UNAVAILABLE = "unavailable"  # the communication backend (or another facility) is not there
BAD_CONFIG = "bad_config"    # what the worker found in force differs from the plan
WORKLOAD_ERROR = "workload_error"  # the user's workload is broken (import error, bad spec, no metric)
INFEASIBLE = "infeasible"    # ruled out before launch; never run
INTERRUPTED = "interrupted"  # the search itself was stopped (Ctrl-C, SIGTERM, kill -9)
OUTCOMES = (OK, CRASH, OOM, TIMEOUT, UNAVAILABLE, BAD_CONFIG, WORKLOAD_ERROR, INFEASIBLE, INTERRUPTED)


@dataclass(frozen=True, kw_only=True)
class RunResult:
    outcome: str
    reason: str = ""
    log_tail: str = ""
    exit_codes: tuple[int | None, ...] = ()
    wall_seconds: float = 0.0
    launched_at: float = 0.0            # time.time() just before the first rank was spawned
    rank_results: tuple[dict[str, Any], ...] = field(default_factory=tuple)  # by rank, as written

    @property
    def ok(self) -> bool:
        return self.outcome == OK


@dataclass(frozen=True, kw_only=True)
class Evaluation:
    """What evaluating one configuration gave (a real trial, or a row of a recorded landscape)."""
    outcome: str
    reason: str = ""
    throughput: float | None = None
    accuracy: float | None = None
    seconds: float = 0.0
    attrs: dict[str, Any] = field(default_factory=dict)


# (config, "throughput" | "accuracy", seed=0): "accuracy" is one seeded quality run
Evaluate = Callable[..., Evaluation]
