"""How long a search's seeded quality runs train, sized by time (pure).

A fixed length made quality the search's largest cost where the workload is slow: on the GPU
machine resnet50's three noise-floor runs of 16384 samples took 3m19s, 44% of a 7.5-minute
budget, before the second trial. So the length follows from the budget and from how fast the
default launch's math trains (its quickest measured launch, which runs those runs): one run is
about QUALITY_RUN_SHARE of the budget, between a floor below which the seeds' spread would hide
any loss that matters and the workload's own length (autotune/training.py's QUALITY_SAMPLES, or
its spec's), whichever is shorter. Every class of one study trains the same length, decided
once and stored on the study: the gate compares equals.

A shorter run costs power, not honesty: the gate widens its tolerance by the seeds' measured
noise (quality/gate.py), so a noisier length rejects a class only when it loses more
(benchmarks/quality_length.py measures how much more, per length).
"""
from __future__ import annotations

import math

# One quality run's share of the budget: the noise floor's and one class's seeds (6 runs) and
# the seeded confirmation of a winner (6 more) then take about 40% of it at most.
QUALITY_RUN_SHARE = 1 / 30
# Below this many samples the built-in cnn's seeds spread so that the gate's noise exceeds 3
# points (benchmarks/results/quality_length.json): a budget that cannot afford it is too short.
MIN_QUALITY_SAMPLES = 8192
# Lengths are whole multiples of this, so that every global batch a space offers divides them.
SAMPLES_MULTIPLE = 1024
# What a quality run costs besides its samples: a window of a running worker (model built, the
# held-out checkpoints, the noise probe); a fresh launch adds its start.
RUN_FIXED_S = 3.0


def sized_samples(*, throughput: float, budget_s: float, most: int,
                  least: int = MIN_QUALITY_SAMPLES) -> int:
    """Samples of one quality run: about QUALITY_RUN_SHARE of the budget at `throughput`
    samples/s, at least `least` and at most `most` (both whole multiples of SAMPLES_MULTIPLE,
    `least` capped at `most`)."""
    least = min(least, most)
    seconds = max(0.0, budget_s * QUALITY_RUN_SHARE - RUN_FIXED_S)
    fit = int(throughput * seconds) // SAMPLES_MULTIPLE * SAMPLES_MULTIPLE
    return max(least, min(most, fit))


def budget_for(samples: int, throughput: float) -> float:
    """The budget whose share buys one run of `samples` at `throughput` (for the message of a
    budget too short to size one)."""
    return (samples / max(throughput, 1e-9) + RUN_FIXED_S) / QUALITY_RUN_SHARE


def run_seconds(samples: int, throughput: float) -> float:
    """What one run of `samples` costs at `throughput`, before any was measured."""
    return RUN_FIXED_S + 1.1 * samples / max(throughput, 1e-9)


def too_short_for_quality(samples: int, throughput: float, budget_s: float) -> str | None:
    """'a 5m budget cannot size a quality run here: ... use at least 9m' when even the floor's
    run takes more than its share, else None."""
    need = budget_for(samples, throughput)
    if need <= budget_s:
        return None
    return (f"the budget cannot size a quality run here: {samples} samples at "
            f"{throughput:.0f} samples/s take {run_seconds(samples, throughput):.0f} s, more "
            f"than {QUALITY_RUN_SHARE:.0%} of it; use at least {math.ceil(need / 60)}m")
