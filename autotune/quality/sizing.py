"""How long a search's seeded quality runs train, sized by time (pure).

A fixed length made quality the search's largest cost where the workload is slow: on the GPU
machine resnet50's three noise-floor runs of 16384 samples took 3m19s, 44% of a 7.5-minute
budget, before the second trial. So the length follows from the budget and from how fast the
default launch's math trains (its quickest measured launch, which runs those runs): one run is
about QUALITY_RUN_SHARE of the budget, between a floor below which the seeds' spread would hide
any loss that matters and the workload's own length (autotune/training.py's QUALITY_SAMPLES, or
its spec's), whichever is shorter. Every class of one study trains the same length, decided
once and stored on the study: the gate compares equals.

A shorter run costs power, not honesty: its seeds spread more, so the paired test's upper bound
of a class's drop (quality/gate.py) is wider and fewer classes are shown within; none is accepted
on that account (benchmarks/accuracy/procedure.py measures bf16's power at the 5- and 10-minute
lengths: 17% and 82%).
"""
from __future__ import annotations

import math

# One quality run's share of the budget: the noise floor's and one class's seeds (6 runs) and
# the seeded confirmation of a winner (6 more) then take about 40% of it at most.
QUALITY_RUN_SHARE = 1 / 30
# The shortest run whose noise still says something: the built-in cnn's 5 seeds spread by 3.7
# points at 4096 samples (six times the default tolerance) and by 1.1 at 8192, 0.7-0.9 at
# 12288-16384
# (benchmarks/results/quality_length.json). A budget that cannot afford it is too short.
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


# Quality runs a class that changes the math costs at most: the noise floor's 3 seeds, its own 3,
# and the confirmation's 3 new seeds on each side.
RUNS_TO_CONFIRM = 12
# ... and the share of the budget they may take before the trials and verification starve.
MOST_FOR_QUALITY = 0.8


def budget_for(samples: int, throughput: float) -> float:
    """The least budget in which RUNS_TO_CONFIRM runs of `samples` at `throughput` take at most
    MOST_FOR_QUALITY of it (for the message of a budget too short to size them)."""
    return RUNS_TO_CONFIRM * run_seconds(samples, throughput) / MOST_FOR_QUALITY


def run_seconds(samples: int, throughput: float) -> float:
    """What one run of `samples` costs at `throughput`, before any was measured."""
    return RUN_FIXED_S + 1.1 * samples / max(throughput, 1e-9)


def too_short_for_quality(samples: int, throughput: float, budget_s: float) -> str | None:
    """'the budget is too short for quality runs here: ... use at least 9m' when even runs of
    the floor's length for one class that changes the math would take most of it, else None."""
    need = budget_for(samples, throughput)
    if need <= budget_s:
        return None
    return (f"the budget is too short for quality runs here: one of {samples} samples at "
            f"{throughput:.0f} samples/s takes about {run_seconds(samples, throughput):.0f} s, "
            f"and judging a class that changes the math takes {RUNS_TO_CONFIRM} of them; use at "
            f"least {math.ceil(need / 60)}m")
