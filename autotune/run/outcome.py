"""How the runner saw a launch end: `RunResult`, with the processes' exit codes, signals and CPU
samples and the ranks' reports as written. run/trial.py turns it into the trial's `TrialResult`
(autotune/result.py, beside the outcome names)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..measure.contention import CpuSample
from ..result import Outcome


@dataclass(frozen=True, kw_only=True)
class RunResult:
    outcome: str
    reason: str = ""
    log_tail: str = ""
    exit_codes: tuple[int | None, ...] = ()
    wall_seconds: float = 0.0
    launched_at: float = 0.0            # time.time() just before the first rank was spawned
    rank_results: tuple[dict[str, Any], ...] = field(default_factory=tuple)  # by rank, as written
    # What happened after training that did not change the outcome: a rank ended as stuck
    # (run/idle.py), an abort in teardown after the result was in.
    notes: tuple[str, ...] = ()
    signalled: tuple[int, ...] = ()     # ranks the runner itself ended (teardown, stuck)
    # The trial's cores as the runner saw them (measure/contention.py): contention over a window
    cpu_samples: tuple[CpuSample, ...] = ()
    num_cpus: int = 0

    @property
    def ok(self) -> bool:
        return self.outcome == Outcome.OK
