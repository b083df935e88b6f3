"""Quality runs sized by time (quality/sizing.py), on literal numbers."""
from __future__ import annotations

import pytest

from autotune.quality.sizing import (MIN_QUALITY_SAMPLES, QUALITY_RUN_SHARE, RUN_FIXED_S,
                                     SAMPLES_MULTIPLE, budget_for, sized_samples,
                                     too_short_for_quality)  # noqa: F401


def test_a_run_is_about_its_share_of_the_budget_between_the_floor_and_the_workloads_length():
    # 5 minutes at 1100 samples/s: (300 / 30 - 3) s x 1100 = 7700 -> the floor, 8192
    assert sized_samples(throughput=1100.0, budget_s=300.0, most=16384) == MIN_QUALITY_SAMPLES
    # 10 minutes: 17 s x 1100 = 18700 -> capped at the workload's 16384
    assert sized_samples(throughput=1100.0, budget_s=600.0, most=16384) == 16384
    # 7.5 minutes at 880 samples/s (the GPU machine's resnet50 with workers): 12 s -> 10240
    assert sized_samples(throughput=880.0, budget_s=450.0, most=16384) == 10240
    n = sized_samples(throughput=5000.0, budget_s=300.0, most=100_000)
    assert n % SAMPLES_MULTIPLE == 0 and n <= 5000.0 * (300.0 * QUALITY_RUN_SHARE - RUN_FIXED_S)


def test_a_workload_whose_own_length_is_below_the_floor_keeps_it():
    assert sized_samples(throughput=10.0, budget_s=60.0, most=4096) == 4096


def test_a_budget_too_short_for_the_floors_run_says_which_would_work():
    # the 2-core EPYC's default launch: 12 runs of 8192 at 924 samples/s fit 80% of 5 minutes
    assert too_short_for_quality(8192, 924.0, 300.0) is None
    message = too_short_for_quality(8192, 100.0, 300.0)
    assert message.startswith("the budget is too short for quality runs here: one of 8192 "
                              "samples at 100 samples/s takes about 93 s, and judging a class "
                              "that changes the math takes 12 of them")
    assert message.endswith(f"use at least {int(-(-budget_for(8192, 100.0) // 60))}m")
    assert budget_for(8192, 100.0) == pytest.approx(12 * (RUN_FIXED_S + 1.1 * 81.92) / 0.8)
