"""Contention from the runner's samples, with literal numbers: the busy time of the trial's
cores beyond its own processes' CPU time is what other processes took."""
from __future__ import annotations

import pytest

from autotune.measure.contention import (DISTURBED_SHARE, CpuSample, busy_seconds, contention,
                                         describe_outside, disturbed)

STAT = """cpu  900 0 300 5000 10 0 5 0 0 0
cpu0 400 10 100 2500 5 1 2 3 0 0
cpu1 500 0 200 2500 5 0 3 0 0 0
intr 12345
"""


def test_busy_seconds_counts_user_nice_system_irq_softirq_steal_of_the_named_cores():
    assert busy_seconds(STAT, [0], 100) == pytest.approx((400 + 10 + 100 + 1 + 2 + 3) / 100)
    assert busy_seconds(STAT, [0, 1], 100) == pytest.approx((516 + 703) / 100)
    assert busy_seconds(STAT, [7], 100) == 0.0


def test_outside_share_is_the_cores_busy_time_beyond_the_trials_own():
    # 2 cores for 10 s = 20 core-seconds; busy 18, the trial's tree 10: others took 8 (40%)
    samples = [CpuSample(at=100.0, busy_s=50.0, tree_s=1.0), CpuSample(at=101.0, busy_s=51.8, tree_s=2.0),
               CpuSample(at=110.0, busy_s=68.0, tree_s=11.0), CpuSample(at=111.0, busy_s=70.0, tree_s=12.0)]
    c = contention(samples, 100.5, 109.5, num_cpus=2)
    assert (c.seconds, c.own_share, c.outside_share) == pytest.approx((10.0, 0.5, 0.4))
    assert c.disturbed and "took 40% of the trial cores" in describe_outside(c.outside_share)


def test_a_quiet_window_is_not_disturbed_and_shares_stay_in_range():
    samples = [CpuSample(at=0.0, busy_s=0.0, tree_s=0.0), CpuSample(at=5.0, busy_s=9.9, tree_s=9.95)]
    c = contention(samples, 0.0, 5.0, num_cpus=2)
    assert c.outside_share == 0.0 and c.own_share == pytest.approx(0.995) and not c.disturbed


@pytest.mark.parametrize("samples, start, end, cpus", [
    ([], 0, 1, 2),
    ([CpuSample(at=0.0, busy_s=0, tree_s=0)], 0, 1, 2),
    ([CpuSample(at=0.0, busy_s=0, tree_s=0), CpuSample(at=0.2, busy_s=1, tree_s=0)], 0, 0.2, 2),
    ([CpuSample(at=0.0, busy_s=0, tree_s=0), CpuSample(at=5.0, busy_s=1, tree_s=0)], 0, 5, 0),
])
def test_samples_that_cannot_cover_the_window_give_nothing(samples, start, end, cpus):
    assert contention(samples, start, end, cpus) is None


def test_one_threshold_decides_disturbed():
    assert not disturbed(None) and not disturbed(DISTURBED_SHARE)
    assert disturbed(DISTURBED_SHARE + 0.01)
