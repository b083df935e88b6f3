"""The decision to end a losing trial after its first timed windows, with literal numbers."""
from __future__ import annotations

import math

import pytest

from autotune.measure.early_stop import StopRule, losing

RULE = StopRule(min_windows=2, target=0.95, z=2.0, run_noise=0.03)


def test_a_trial_clearly_below_the_leader_stops_with_its_reason():
    # mean 50, sd 0 -> upper 50 + 0 + 1.5 = 51.5 < 95 (95% of 100)
    d = losing([50.0, 50.0], 100.0, RULE)
    assert d.stop and d.windows == 2
    assert d.upper == pytest.approx(51.5) and d.bound == pytest.approx(95.0)
    assert d.reason.startswith("stopped early after 2 windows")


def test_one_window_is_never_enough_and_without_a_leader_nothing_stops():
    assert not losing([10.0], 100.0, RULE).stop
    assert not losing([10.0, 10.0], None, RULE).stop
    assert not losing([10.0, 10.0], 0.0, RULE).stop
    assert math.isinf(losing([10.0], 100.0, RULE).upper)


def test_noise_between_windows_keeps_a_close_trial_running():
    # mean 90, windows 80 and 100: sd 14.14, sem 10 -> upper 90 + 20 + 2.7 = 112.7 > 95
    d = losing([80.0, 100.0], 100.0, RULE)
    assert not d.stop and d.upper == pytest.approx(112.7, abs=0.01)
    # the same mean with steady windows is clearly losing: 90 + 0 + 2.7 = 92.7 < 95
    assert losing([90.0, 90.0], 100.0, RULE).stop


def test_run_to_run_noise_protects_a_trial_just_below_the_target():
    # 93 steady: 93 + 2.79 = 95.79 >= 95: could still be the answer, keeps running
    assert not losing([93.0, 93.0, 93.0], 100.0, RULE).stop
    assert losing([93.0, 93.0, 93.0], 100.0, StopRule(run_noise=0.0)).stop


@pytest.mark.parametrize("bad", [dict(min_windows=0), dict(target=0.0), dict(target=1.5),
                                 dict(z=-1.0), dict(run_noise=-0.1)])
def test_a_bad_rule_is_refused(bad):
    with pytest.raises(ValueError):
        StopRule(**bad)
