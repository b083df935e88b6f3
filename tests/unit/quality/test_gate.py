"""The accuracy gate: samples over seeds, the paired non-inferiority test and its three answers,
divergence, the single-run bound, the seeds a class would need, Student t quantiles, and the one
wording of a verdict. Literal numbers."""
import math

import pytest

from autotune.quality import gate as Q


def test_sample_mean_and_sd():
    s = Q.Sample((0.90, 0.92, 0.94))
    assert s.mean == pytest.approx(0.92)
    assert s.sd == pytest.approx(0.02)
    assert Q.Sample((0.5,)).sd == 0.0


def test_a_class_is_within_only_when_the_upper_bound_of_its_paired_drop_is():
    # drops 0.2, 0.4, 0.3 pp: mean 0.3, sd 0.1, se 0.0577; upper = 0.3 + 2.920 * 0.0577 = 0.469
    b = Q.paired({0: 0.900, 1: 0.910, 2: 0.920}, {0: 0.898, 1: 0.906, 2: 0.917}, 1.0)
    assert b.drop_pp == pytest.approx(0.3)
    assert b.se_pp == pytest.approx(0.1 / math.sqrt(3))
    assert b.upper_pp == pytest.approx(0.3 + 2.920 * 0.1 / math.sqrt(3), rel=1e-5)
    assert b.answer == Q.Shown.WITHIN and b.margin_pp < 0
    assert b.describe() == ("within 1 pp (95% upper bound of the drop 0.47 pp, 3 paired seeds; "
                            "worst seed 1 lost 0.40 pp)")


def test_a_drop_the_runs_cannot_resolve_is_not_shown_never_within():
    # the round-6 case: a 54-point mean drop with 79 points of noise was called "within 1 pp"
    d = {0: 0.90, 1: 0.93, 2: 0.96}                   # the default's seeds spread by 3 pp
    c = {0: 0.85, 1: 0.925, 2: 0.95}                  # drops 5.0, 0.5, 1.0
    b = Q.paired(d, c, 1.0)
    assert b.lower_pp < 1.0 < b.upper_pp
    assert b.answer == Q.Shown.NOT_SHOWN
    assert b.describe().startswith("not shown within 1 pp (drop 2.17 pp, 95% upper bound ")


def test_pairing_removes_what_the_seeds_share():
    # the same per-seed drops (0.5 +- 0.1) on seeds that spread by 5 points: unpaired, the
    # spread would hide everything; paired, it is within
    d = {0: 0.90, 1: 0.95, 2: 0.85, 3: 0.92}
    c = {0: 0.896, 1: 0.944, 2: 0.845, 3: 0.915}
    b = Q.paired(d, c, 1.0)
    assert b.answer == Q.Shown.WITHIN
    assert b.se_unpaired_pp > 10 * b.se_pp
    assert b.correlation == pytest.approx(1.0, abs=1e-3)


def test_a_drop_shown_beyond_the_tolerance():
    b = Q.paired({0: 0.926, 1: 0.934, 2: 0.922}, {0: 0.80, 1: 0.81, 2: 0.79}, 1.0)
    assert b.answer == Q.Shown.BEYOND and b.lower_pp > 1.0 and b.margin_pp > 0
    assert b.describe().startswith("beyond 1 pp (drop 12.73 pp, 95% lower bound ")


def test_a_seed_that_diverged_puts_the_class_beyond_whatever_the_others_say():
    b = Q.paired({0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0}, {0: 1.0, 1: 0.10, 2: 1.0, 3: 1.0}, 1.0)
    assert b.diverged == (1,) and b.answer == Q.Shown.BEYOND and b.margin_pp >= 1.0
    assert b.describe() == "beyond 1 pp: seed 1 diverged (drop up to 90.0 pp, 4 paired seeds)"
    # a quality that is not a number is a failed seed: against the class, named, never averaged
    nan = Q.paired({0: 0.9, 1: 0.9, 2: 0.9}, {0: 0.9, 1: float("nan"), 2: 0.9}, 1.0)
    assert nan.failed == ((1, "its quality is not a number"),) and nan.n == 2
    assert nan.answer == Q.Shown.NOT_SHOWN and nan.margin_pp >= 1.0


def test_only_the_seeds_both_sides_have_are_paired():
    b = Q.paired({0: 0.9, 1: 0.9, 2: 0.9}, {1: 0.9, 2: 0.9, 7: 0.1}, 1.0)
    assert b.seeds == (1, 2) and b.n == 2
    one = Q.paired({0: 0.9}, {0: 0.9}, 1.0)
    assert one.answer == Q.Shown.NOT_SHOWN and math.isinf(one.upper_pp)
    assert "a bound needs 2 or more" in one.describe()


def test_a_lower_is_better_metric_counts_a_rise_as_the_drop():
    b = Q.paired({0: 1.00, 1: 1.01, 2: 0.99}, {0: 1.30, 1: 1.31, 2: 1.29}, 1.0,
                 lower_is_better=True)
    assert b.drop_pp == pytest.approx(30.0) and b.answer == Q.Shown.BEYOND


def test_the_seeds_that_would_show_a_class_from_its_drop_and_spread():
    # drop 0.3, per-seed sd 0.6: 3 seeds give 0.3 + 2.920 * 0.346 = 1.31 (not shown);
    # 4 give 0.3 + 2.353 * 0.3 = 1.006; 5 give 0.3 + 2.132 * 0.268 = 0.87
    b = Q.paired({0: 0.9, 1: 0.9, 2: 0.9}, {0: 0.903, 1: 0.897, 2: 0.891}, 1.0)
    assert b.drop_pp == pytest.approx(0.3) and b.se_pp * math.sqrt(3) == pytest.approx(0.6)
    assert b.answer == Q.Shown.NOT_SHOWN
    assert Q.pairs_to_show(b) == 5
    beyond = Q.paired({0: 0.9, 1: 0.9, 2: 0.9}, {0: 0.88, 1: 0.885, 2: 0.89}, 1.0)
    assert Q.pairs_to_show(beyond) is None            # a drop past the tolerance: no number will


def test_t_quantiles_and_welch_df():
    assert Q.t95(2) == pytest.approx(2.920, abs=1e-3)
    assert Q.t95(4.7) == pytest.approx(2.132, abs=1e-3)   # rounded down: the cautious side
    # above 30 degrees of freedom: Student's, not the normal's 1.645 (5.25-5.5% true level)
    assert Q.t95(40) == pytest.approx(1.684, abs=1e-3)
    assert Q.t95(120) == pytest.approx(1.658, abs=1e-3)
    assert Q.t_quantile(0.9875, 7) == pytest.approx(2.841, abs=1e-3)   # a look's level
    assert Q.t_quantile(0.975, 1) == pytest.approx(12.706, abs=1e-3)
    assert Q.welch_df(1.0, 1.0, 3, 3) == pytest.approx(4.0)


def test_one_run_against_the_default_seeds_is_bounded_as_one_new_run_would_be():
    default = Q.Sample((0.80, 0.81, 0.82))                 # mean 0.81, sd 1 pp
    spread = 1.0 * (1 + 1 / 3) ** 0.5
    b = Q.single_run(default, 0.81, 1.0)                  # no drop at all
    assert b.upper_pp == pytest.approx(Q.t95(2) * spread)  # 3.37 pp: not shown
    assert b.answer == Q.Shown.NOT_SHOWN and not b.paired
    assert "one run against the default's 3 seeds" in b.describe()
    tight = Q.single_run(Q.Sample((0.81, 0.8101, 0.8099)), 0.8095, 1.0)
    assert tight.answer == Q.Shown.WITHIN
    far = Q.single_run(default, 0.70, 1.0)
    assert far.answer == Q.Shown.BEYOND
    assert Q.single_run(Q.Sample((0.8,)), 0.8, 1.0).answer == Q.Shown.NOT_SHOWN


def test_a_failed_seed_makes_the_class_not_shown_at_best_and_is_named():
    d = {s: 0.90 + 0.01 * s for s in range(6)}
    c = {s: v - 0.001 for s, v in d.items() if s != 2}   # 0.1 pp on every seed but 2
    b = Q.paired(d, c, 1.0, failed={2: "timeout: ran past 60 s"})
    assert b.n == 5 and b.upper_pp < 1.0                   # the others alone would be within
    assert b.answer == Q.Shown.NOT_SHOWN and Q.pairs_to_show(b) is None
    assert b.describe() == ("not shown within 1 pp: failed on seed 2 (timeout: ran past 60 s); "
                            "drop 0.10 pp on the other 5 paired seeds")


def test_a_failed_default_seed_is_the_defaults_its_pair_left_out():
    d = {s: 0.90 + 0.01 * s for s in range(4) if s != 1}
    c = {s: 0.90 + 0.01 * s - 0.001 for s in range(4)}
    b = Q.paired(d, c, 1.0, default_failed={1: "crash: exit 1"})
    assert b.seeds == (0, 2, 3) and not b.failed and b.answer == Q.Shown.WITHIN
    assert b.describe().endswith("; the default's seed 1 failed (crash: exit 1): its pair left out")


def test_the_worst_seed_is_judged_not_only_the_mean():
    # 11 seeds at 0 and one losing 4 pp: the mean (0.33 pp) and its bound pass; the seed is 4
    # pp past a default whose own seeds spread by 0.5 pp: a spike
    d = {s: 0.90 + (0.005 if s % 2 else -0.005) for s in range(12)}
    c = dict(d)
    c[7] = d[7] - 0.04
    b = Q.paired(d, c, 1.0)
    assert b.upper_pp < 1.0 and b.spiked == ((7, pytest.approx(4.0)),)
    assert b.answer == Q.Shown.NOT_SHOWN and b.margin_pp >= 1.0
    assert b.describe().startswith("not shown within 1 pp: seed 7 lost 4.00 pp, past the "
                                   "tolerance by more than 5x the default's seed-to-seed spread")
    # a spread measured on more of the default's runs moves the limit
    assert Q.paired(d, c, 1.0, spread_pp=1.0).answer == Q.Shown.WITHIN


def test_identical_drops_are_not_a_spread_of_zero():
    b = Q.paired({0: 0.9, 1: 0.91}, {0: 0.891, 1: 0.901}, 1.0)   # 0.9 pp on both seeds
    assert b.se_pp == pytest.approx(Q.RESOLUTION_PP / math.sqrt(2))
    assert b.answer == Q.Shown.NOT_SHOWN and b.upper_pp > 1.0
