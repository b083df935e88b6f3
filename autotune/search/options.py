"""What a search is asked to do (`SearchOptions`) and what it returns (`SearchResult`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ..quality.evidence import QualityBook
from ..training import QUALITY_SAMPLES
from ..study.records import Record
from .references import STARTUP_TRIALS
from .reserve import RunCosts


GUIDES = ("descent", "guess", "none")


class Clock(Protocol):
    def elapsed(self) -> float: ...


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    budget_s: float
    verify_reserve_s: float = 0.0
    min_trial_s: float = 10.0
    max_accuracy_drop: float = 1.0   # percentage points below the default launch
    # Whether the workload's model has BatchNorm: its statistics are per rank (and per
    # micro-batch), which makes the batch each rank sees part of the math (quality.math_class).
    batchnorm: bool = True
    quality_seeds: tuple[int, ...] = (0, 1, 2)
    quality_samples: int = QUALITY_SAMPLES   # of one quality run (its cost, for the budget)
    # The quality runs' length is sized by time (quality/sizing.py), `quality_samples` at most;
    # False: exactly `quality_samples` (the user's --quality-samples, or the workload's own).
    size_quality: bool = False
    patience: int = 30               # measured trials without a 1% gain before stopping
    # ... but not before this share of the budget is spent: on large machines (thousands of
    # configurations, benchmarks/replay/at_scale.py) 30 flat trials came after ~9 of 30 minutes
    # with the best find still ~7% below the optimum, which the remaining budget would have found.
    stagnation_after: float = 0.5
    verify_configs: int = 4          # at most: default launch + candidates re-run in each verify round
    verify_rounds: int = 3
    seed: int = 0
    # TPE's start-up trials, drawn by the search from launchable configurations (0: TPE's own
    # uniform draws over the whole grid; docs/benchmarks.md, "Search at scale", compares both)
    startup_draws: int = STARTUP_TRIALS
    # What proposes trials before the sampler's model does (autotune/search/guide.py): "descent"
    # (the hardware's first guess, then coordinate descent around the leader), "guess" (only the
    # first guess) or "none" (the start-up draws straight away). docs/search-at-scale.md has the
    # comparison on the simulated machines, where "descent" won; `autotune search --guide`.
    guide: str = "descent"
    # A sampled trial clearly losing to the leader after its first timed windows ends early
    # (measure/early_stop.py). Needs an evaluator that takes `leader=` (run.trial's live one);
    # `autotune search` turns it on for built-in workloads, whose worker times windows.
    early_stop: bool = False
    # Each math class's ceiling (the step with its batches resident, measure/split.py) is timed
    # after a whole window that reaches the class's highest so far (or its first). Needs an
    # evaluator that takes `ceiling_above=` (run.evaluate's); built-in workloads only.
    ceiling: bool = False
    max_trials: int | None = None
    # Script mode: accuracy is whatever the script reported with its speed (maybe nothing); it
    # constrains only when both the trial and the default launch reported one.
    reported_accuracy: bool = False
    accuracy_required: bool = False      # script mode with --accuracy REGEX
    # Script mode with --accuracy and a script that takes a seed: the default launch is run with
    # these seeds first, and their spread is the accuracy gate's noise floor (as built-ins have).
    script_seeds: tuple[int, ...] = ()
    # Script mode: knobs the static scan found overridden ({knob: file:line and why}).
    overridden: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.guide not in GUIDES:
            raise ValueError(f"guide={self.guide!r}: choose one of {', '.join(GUIDES)}")


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    records: list[Record]
    default: Record | None
    run_cpu: Record | None
    stop_reason: str
    measured: int      # configurations actually launched (this run)
    book: QualityBook | None = None
    # what a start and a window cost in this search (search/reserve.py): verification's lineup
    # is cut to what the time left can settle at these costs (recommend/fit.py)
    costs: RunCosts | None = None
    # the rounds it kept to settle the winner's ratio (search/reserve.settling_rounds), which a
    # confirmation leaves time for (recommend/choose.py); None: none priced (no run measured)
    settle_rounds: int | None = None
