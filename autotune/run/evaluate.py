"""The search's evaluator over real trials: one configuration, one timed or seeded run, with the
trial's timeout sized from what was measured. Across hosts it also runs a math class's seeded
quality runs side by side, one lane of hosts each (`lanes`, `at_once`): the default launch runs
on one host, and with two hosts its three noise-floor seeds then take two runs' time, not three.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ..config import Config
from ..plan.launch_plan import CEILING_SECONDS
from ..probe.topology import Topology
from ..result import Outcome, TrialResult
from .trial import MIN_TRIAL_TIMEOUT_S, TrialSettings, run_trial, run_trials_at_once
from .unreached import unreached_line
from .warm import WarmLaunches


# A cold torch.compile of a built-in model took 30 s on 2 busy cores; a large model can take
# minutes. Until one was measured, a compiled trial gets this much more than an eager one.
COMPILE_ALLOWANCE_S = 240.0


class LiveEvaluator:
    """`evaluate(config, mode, seed=, samples=, leader=, ceiling_above=)` (result.Evaluate) with
    real trials. The per-trial timeout follows from the first good trial's duration unless
    `adapt_timeout` is off (the user set one), and never lets a trial run past the budget.
    `warm`: the built-in worker runs each trial as a window of its launch's session, on this
    machine or across hosts (run/warm.py); `close` ends them."""

    def __init__(self, topology: Topology, settings: TrialSettings, *,
                 time_left: Callable[[], float] = lambda: float("inf"),
                 adapt_timeout: bool = True, warm: bool = True) -> None:
        self.topology, self.settings = topology, settings
        self.time_left, self.adapt_timeout = time_left, adapt_timeout
        # across hosts too: run/trial.py starts afresh what plan/cluster.kept_problem refuses
        self.warm = WarmLaunches() if warm and settings.script is None else None
        self.timeout = settings.timeout_s
        self.speed: dict[str, float] = {}   # config key -> samples/s, to size quality timeouts
        # what a compiled trial may take beyond the timeout an eager one learned (its compile):
        # COMPILE_ALLOWANCE_S until a compile was measured, then 3x the longest one
        self.compile_allowance = COMPILE_ALLOWANCE_S
        self.compiled = False   # a compile was measured
        self.script_accuracy: dict[str, float | None] = {}

    def __call__(self, config: Config, mode: str, *, seed: int = 0, samples: int | None = None,
                 leader: float | None = None, ceiling_above: float | None = None) -> TrialResult:
        """`ceiling_above`: after a whole speed window of at least this many samples/s, the
        ceiling too (None: not asked; 0: whatever the window measured)."""
        if mode == "accuracy" and self.settings.script:
            # A script is not rerun for accuracy: what it reported alongside its speed stands.
            return TrialResult(outcome=Outcome.OK, accuracy=self.script_accuracy.get(config.key()))
        settings = self._settings(config, mode, samples, leader)
        if ceiling_above is not None and mode == "throughput" and not settings.script:
            settings = replace(settings, ceiling_seconds=CEILING_SECONDS,
                               ceiling_above=ceiling_above)
        out = run_trial(config, self.topology, settings, mode=mode, seed=seed, warm=self.warm)
        self._learn(config, mode, out)
        return out

    def close(self) -> str | None:
        """End the launches kept running between trials: what to tell of hosts that could not
        be reached to end a launch's processes there (None: every one was)."""
        if self.warm is not None and (owed := self.warm.close()):
            return unreached_line(owed)
        return None

    def running(self, config: Config) -> bool:
        """Whether `config`'s launch is kept running: its next run is a window of it."""
        return self.warm is not None and self.warm.running(config)

    def lanes(self, config: Config) -> int:
        """How many runs of `config` fit side by side on disjoint hosts (1: one at a time, as
        on one machine or for a script, whose quality is not rerun)."""
        cluster = self.settings.cluster
        if cluster is None or self.settings.script:
            return 1
        return max(1, len(cluster.hosts) // max(1, config.nnodes))

    def at_once(self, config: Config, mode: str, seeds: list[int],
                samples: int | None = None) -> list[TrialResult]:
        """One run per seed, at the same time, lane by lane (at most `lanes(config)` seeds)."""
        cluster = self.settings.cluster
        if cluster is None or len(seeds) > self.lanes(config):
            raise ValueError(f"{len(seeds)} runs at once but {self.lanes(config)} lane(s)")
        base = self._settings(config, mode, samples, None)
        settings = [replace(base, cluster=cluster.lane(i, config.nnodes))
                    for i in range(len(seeds))]
        outs = run_trials_at_once(config, self.topology, settings, mode=mode, seeds=list(seeds),
                                  warm=self.warm)
        for out in outs:
            self._learn(config, mode, out)
        return outs

    def _settings(self, config: Config, mode: str, samples: int | None,
                  leader: float | None) -> TrialSettings:
        timeout = self.timeout
        if mode == "accuracy" and config.key() in self.speed:
            # A quality run trains a fixed number of samples (plus held-out checkpoints and the
            # gradient noise probe): its length follows from the speed.
            timeout = 60.0 + 3.0 * (samples or self.settings.accuracy_samples) \
                / self.speed[config.key()]
        if config.compile and mode == "throughput" and self.adapt_timeout:
            timeout += self.compile_allowance
        timeout = max(5.0, min(timeout, self.time_left()))
        return replace(self.settings, timeout_s=timeout,
                       accuracy_samples=samples or self.settings.accuracy_samples,
                       leader_throughput=leader)

    def _learn(self, config: Config, mode: str, out: TrialResult) -> None:
        if self.settings.script:
            self.script_accuracy[config.key()] = out.accuracy if out.ok else None
        if out.ok and mode == "throughput":
            self.speed[config.key()] = out.throughput
            if out.compile_s:
                self.compile_allowance = max(60.0, 3.0 * out.compile_s,
                                             self.compile_allowance if self.compiled else 0.0)
                self.compiled = True
            if self.adapt_timeout and self.timeout == self.settings.timeout_s:
                # 4x the first good trial (at least 30 s): a slow config still finishes, a hung
                # one does not eat the budget.
                self.timeout = max(MIN_TRIAL_TIMEOUT_S, 4.0 * out.seconds)


def live_evaluator(topology: Topology, settings: TrialSettings, *,
                   time_left: Callable[[], float] = lambda: float("inf"),
                   adapt_timeout: bool = True, warm: bool = True) -> LiveEvaluator:
    """Evaluate configurations with real trials (see LiveEvaluator)."""
    return LiveEvaluator(topology, settings, time_left=time_left, adapt_timeout=adapt_timeout,
                         warm=warm)
