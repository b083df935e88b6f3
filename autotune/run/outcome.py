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
    # Files in the trial folder that were not the launch's own (util/channel.py), ignored
    ignored: int = 0
    # What the runner read of the ranks' logs (each one's last lines) and, for a user's script,
    # rank 0's output (its last MiBs) and its report (autotune.report_metrics): read through the
    # trial folder while the runner held it (run/trial_files.py), never by its name afterwards
    tails: tuple[str, ...] = ()
    script_log: str = ""
    script_report: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == Outcome.OK


def folder_refused(exc: Exception, launched_at: float) -> RunResult:
    """A launch whose trial folder failed its checks (util/checked_folder.FolderRefused): nothing
    was started and nothing written; the trial failed, the search goes on."""
    return RunResult(outcome=Outcome.CRASH, reason=f"trial folder refused: {exc}",
                     launched_at=launched_at)
