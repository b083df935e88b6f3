"""The gradient noise scale, goodput and time to target. Literal numbers."""
import math

import pytest

from autotune.quality import goodput as Q


def test_noise_scale_recovers_a_known_gradient_and_noise():
    # |G|^2 = 2 and tr(S) = 64: E|G_b|^2 = 2 + 64/b, so b=8 -> 10, B=32 -> 4
    ns = Q.noise_scale([10.0, 10.0], [4.0], small=8, big=32)
    assert ns.grad_sq == pytest.approx(2.0)
    assert ns.trace == pytest.approx(64.0)
    assert ns.b_noise == pytest.approx(32.0)
    # a negative estimate (noise dominated) is "unknown", not a number
    assert Q.noise_scale([1.0], [3.0], small=8, big=32).b_noise is None


def test_efficiency_and_goodput_follow_pollux():
    assert Q.efficiency(32.0, 32, 32) == 1.0
    assert Q.efficiency(32.0, 64, 32) == pytest.approx(64 / 96)
    assert Q.efficiency(None, 32, 32) == 1.0
    assert math.isnan(Q.efficiency(None, 64, 32))
    # twice the throughput at twice the batch, B_noise = 32: 2 x 2/3 = 4/3 of the goodput
    assert Q.goodput(2000.0, 32.0, 64, 32) == pytest.approx(2000 * 64 / 96)


def test_samples_to_target_interpolates_the_mean_curve():
    curves = [[(1000, 0.50), (2000, 0.80), (3000, 0.90)],
              [(1000, 0.60), (2000, 0.84), (3000, 0.92)]]
    assert Q.samples_to_target(curves, 0.82) == 2000
    assert Q.samples_to_target(curves, 0.865) == 2500  # mean curve 0.55, 0.82, 0.91: halfway
    assert Q.samples_to_target(curves, 0.95) is None
    assert Q.samples_to_target(curves, 0.40) == 1000
    assert Q.samples_to_target([[(10, 2.0), (20, 1.0)]], 1.5, lower_is_better=True) == 15

