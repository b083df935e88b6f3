"""What `autotune search` is asked (SearchRequest, checked once) and what it answers (Tuned), and
the check of the workload it names, before any trial."""
from __future__ import annotations

import hashlib
import math
import os
import time
from dataclasses import dataclass

from ..config import DEFAULT_WORKLOAD
from ..config.limits import MAX_SAMPLES
from ..training import MAX_QUALITY_SEEDS
from ..errors import AutotuneError, WorkloadError
from ..recommend.recommendation import Recommendation
from ..recommend.weigh import DEFAULT_RUN_LENGTH, RUN_LENGTH_FLAG, RunLength, parse_run_length
from ..run.idle import IDLE_DEADLINE_S
from ..run.trials_dir import DEFAULT_KEEP as DEFAULT_KEEP_TRIALS
from ..script.spec import ScriptSpec
from ..search.options import SearchResult
from .hosts import Hosts
from ..study.storage import default_storage


@dataclass(frozen=True, kw_only=True)
class SearchRequest:
    """Everything `autotune search` is asked, as one value (the CLI's flags, by the same names).
    Checked once, here, with messages that name the flag."""
    budget_s: float
    workload: str | None = None                 # built-in name or module:function; None:
                                                # not given (DEFAULT_WORKLOAD, or a script)
    script: ScriptSpec | None = None            # a user's command (script mode)
    seconds: float | None = None                # timed window; None: from the budget
    results: str = "autotune-results"
    storage: str | None = None                  # None: the SQLite file under `results`
    space: str | None = None                    # None: the built-in space for this machine
    max_accuracy_drop: float = 1.0
    quality_seeds: int = 3
    quality_samples: int | None = None
    seed: int = 0
    max_trials: int | None = None
    verify_rounds: int = 3
    # rounds verification may go on to while the speedup is unsettled; None: MAX_ROUNDS_FACTOR x
    max_verify_rounds: int | None = None
    trial_timeout: float | None = None
    allow_concurrent: bool = False
    idle_timeout: float = IDLE_DEADLINE_S       # see run/idle.py
    keep_trials: int | None = DEFAULT_KEEP_TRIALS   # trial folders kept; None: all (trials_dir.py)
    guide: str = "descent"                      # search/guide.py (GUIDES)
    early_stop: bool = True                     # built-in workloads only: measure/early_stop.py
    quiet_numa: bool = False                    # numa_balancing off while searching (run/numa_quiet.py)
    # the hosts --hosts, --hostfile or a SLURM allocation ask for; None: this machine only
    hosts: Hosts | None = None
    # the user's real training, which a compile's cost is weighed against (recommend/weigh.py)
    run_length: RunLength = parse_run_length(DEFAULT_RUN_LENGTH)

    def __post_init__(self) -> None:
        if not math.isfinite(self.max_accuracy_drop) or not 0 <= self.max_accuracy_drop < 100:
            raise AutotuneError(f"--max-accuracy-drop {self.max_accuracy_drop}: must be a number "
                                "from 0 to below 100 (percentage points)")
        if not 2 <= self.quality_seeds <= MAX_QUALITY_SEEDS:
            raise AutotuneError(f"--quality-seeds {self.quality_seeds}: at least 2 seeds are "
                                f"needed to measure the noise, and at most {MAX_QUALITY_SEEDS}")
        if self.quality_samples is not None and not 1 <= self.quality_samples <= MAX_SAMPLES:
            raise AutotuneError(f"--quality-samples {self.quality_samples}: must be positive, "
                                f"and at most {MAX_SAMPLES:,}")
        if self.keep_trials is not None and self.keep_trials < 1:
            raise AutotuneError(f"--keep-trials {self.keep_trials}: keep at least 1 (or 'all')")
        if self.verify_rounds < 1:
            raise AutotuneError(f"--verify-rounds {self.verify_rounds}: must be at least 1")
        if self.script is not None and self.run_length.steps is not None:
            raise AutotuneError(f"{RUN_LENGTH_FLAG} {self.run_length.text()}: a script's score "
                                "is not samples per second, so steps cannot be turned into "
                                "time; give the run's length as a time, e.g. 2h")
        if self.max_verify_rounds is not None and self.max_verify_rounds < self.verify_rounds:
            raise AutotuneError(f"--max-verify-rounds {self.max_verify_rounds}: must be at least "
                                f"--verify-rounds ({self.verify_rounds})")

    @property
    def url(self) -> str:
        return self.storage or default_storage(self.results)


@dataclass(frozen=True, kw_only=True)
class Tuned:
    """What a search found: `summary` is what `autotune search --json` prints."""
    summary: dict[str, object]
    result: SearchResult
    recommendation: Recommendation | None
    command: str | None
    stored: dict[str, object] | None    # another worker's recommendation (shared search)
    overridden: dict[str, str] | None   # script mode: knobs the script overrides


def check_workload(workload: str | None = None, script: ScriptSpec | None = None) -> str:
    """Validate the workload in this process before any trial; returns its label for studies.
    `workload` None: none was named (the default one, unless a command is given).

    Script mode (a command): program, script file, placeholders and --metric pattern. Otherwise
    the workload is loaded here once: a typo in `module:function`, an import error or a wrong
    return type is one line at once, not two failed reference trials."""
    if script is None:
        workload = workload or DEFAULT_WORKLOAD
        from ..worker.workloads import get_workload
        try:
            get_workload(workload)
        except WorkloadError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's own code failed: its words
            raise WorkloadError(f"workload {workload!r} failed when loaded: "
                                f"{type(exc).__name__}: {exc}") from exc
        return workload
    if workload is not None:
        raise WorkloadError("give either --workload or a command after `--`, not both")
    script.check()
    command = script.command
    named = next((os.path.basename(a) for a in command[1:] if a.endswith(".py")),
                 os.path.basename(command[0]))
    digest = hashlib.sha1(repr((command, script.metric, os.getcwd())).encode()).hexdigest()[:8]
    if script.lower_is_better:   # another score for the same numbers: another study
        digest = hashlib.sha1(f"{digest}:lower".encode()).hexdigest()[:8]
    return f"script-{named}-{digest}"


class MonotonicClock:
    """Seconds since the search started, on the wall clock. A replay passes its own clock (any
    object with `elapsed()`), advanced by what each recorded trial cost."""

    def __init__(self, started: float | None = None) -> None:
        self.started = time.monotonic() if started is None else started

    def elapsed(self) -> float:
        return time.monotonic() - self.started
