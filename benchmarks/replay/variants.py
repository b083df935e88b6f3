"""Variants of the search that efficiency.py replays beside the search's own default:
a hardware-informed warm start, and losing trials ended after their first windows."""
from __future__ import annotations

import dataclasses
import random
import statistics
from typing import Any

from autotune import result as R
from autotune.config import Config
from autotune.measure.early_stop import StopRule, losing
from autotune.result import Outcome

from benchmarks.landscapes.table import Landscape, SimClock


def warm_start_params(space, topology) -> list[dict[str, Any]]:
    """A candidate hardware-informed warm start, tried right after the references (opt-in with
    --warm-start; NOT in autotune/search/loop.py, because on the synthetic landscapes it did not reach
    95% sooner and made the stagnation rule stop earlier). The bets: all cores in one rank doing
    native bf16 (avx512_bf16/AMX), and one rank per core; both with the best allocator and pinning
    found. Enqueued before run_search, the sampler's first asks return them."""
    knobs = space.knobs
    first = {k: v[0] for k, v in knobs.items()}

    def pick(knob: str, *prefer: Any) -> Any:
        return next((p for p in prefer if p in knobs.get(knob, ())), first.get(knob))

    common = {**first, "allocator": pick("allocator", "tcmalloc", "jemalloc"),
              "binding": pick("binding", "numactl", "taskset"),
              "precision": pick("precision", "bf16" if topology.isa.bf16 else "fp32")}
    per_node = space.topology_names.get("cores_per_node", 1)
    usable = space.topology_names.get("usable_cores", 1)
    bets = [{**common, "ranks_per_numa_node": pick("ranks_per_numa_node", 1), "threads": pick("threads", usable)},
            {**common, "ranks_per_numa_node": pick("ranks_per_numa_node", per_node), "threads": pick("threads", 1)}]
    out = []
    for params in bets:
        params = {k: v for k, v in params.items() if k in knobs}
        if params not in out and not space.violations(params):
            out.append(params)
    return out


def early_stopping(land: Landscape, clock: SimClock, seed: int,
                   rule: StopRule = StopRule(), windows: int = 5, window_cv: float = 0.03):
    """The landscape's evaluator with losing trials ended early (autotune.measure.early_stop):
    the timed window is `windows` windows whose throughputs scatter by `window_cv` around the
    recorded one (the recorded landscape's median step CV is 8%, over ~20 steps a window); a trial
    stopped after k windows costs (windows - k) / windows of its timed window less, and returns
    the mean of its k windows with the decision as `stopped_early`, as the worker does. The leader
    is the one the search gives each sampled trial (`leader=`: SearchOptions.early_stop), as in a
    real search; the references get none and run whole."""
    base = land.evaluator(clock)
    rng = random.Random(seed)
    window_s = float(land.data.get("target_seconds") or 5.0) * land.data.get("trial_scale", 1.0)

    def evaluate(config: Config, mode: str, *, leader: float | None = None,
                 **kw: Any) -> R.TrialResult:
        ev = base(config, mode, **kw)
        if mode != "throughput" or ev.outcome != Outcome.OK or not ev.throughput or not leader:
            return ev
        seen: list[float] = []
        for _ in range(windows):
            seen.append(ev.throughput * (1 + rng.gauss(0.0, window_cv)))
            decision = losing(seen, leader, rule)
            if decision.stop:
                saved = (windows - len(seen)) / windows * window_s
                clock.t -= saved
                return dataclasses.replace(ev, throughput=statistics.fmean(seen),
                                           seconds=ev.seconds - saved,
                                           stopped_early=decision.reason)
        return ev
    return evaluate
