import math

import pytest

from autotune.measure.stats import Stats, aggregate, quantile, ratio_stats


def test_stats_of_four_values():
    s = Stats.of([4, 1, 3, 2])
    assert (s.n, s.median, s.q1, s.q3, s.iqr) == (4, 2.5, 1.75, 3.25, 1.5)
    assert s.mean == 2.5
    assert s.stdev == pytest.approx(math.sqrt(5 / 3))
    assert s.cv == pytest.approx(math.sqrt(5 / 3) / 2.5)
    assert (s.min, s.max) == (1, 4)


def test_stats_odd_count_and_single_value():
    s = Stats.of([3.0, 1.0, 2.0])
    assert (s.median, s.q1, s.q3) == (2.0, 1.5, 2.5)
    one = Stats.of([7.0])
    assert (one.median, one.iqr, one.stdev, one.cv) == (7.0, 0.0, 0.0, 0.0)


def test_stats_rejects_empty_and_zero_mean_cv():
    with pytest.raises(ValueError):
        Stats.of([])
    assert Stats.of([-1.0, 1.0]).cv == 0.0


def test_quantile_linear_interpolation():
    xs = [10.0, 20.0, 30.0, 40.0, 50.0]
    assert quantile(xs, 0.0) == 10.0
    assert quantile(xs, 1.0) == 50.0
    assert quantile(xs, 0.1) == 14.0
    assert quantile(xs, 0.9) == 46.0


def _rank(rank, **kw):
    base = {"status": "ok", "rank": rank, "world_size": 2, "step_times": [0.1, 0.1, 0.2, 0.2],
            "window_seconds": 0.64, "timed_steps": 4, "samples": 256, "throughput": 400.0,
            "first_step_at": 103.0, "timed_end_at": 110.0, "peak_rss_bytes": 1000,
            "accuracy": None, "final_loss": 0.5}
    return {**base, **kw}


def test_aggregate_two_ranks():
    m = aggregate([_rank(0), _rank(1, first_step_at=103.5, timed_end_at=110.2, peak_rss_bytes=3 << 20,
                                   throughput=390.0)], launched_at=100.0)
    assert m.outcome == "ok" and m.throughput == 400.0   # rank 0's window is authoritative
    assert m.step_median_s == pytest.approx(0.15)
    assert m.step_iqr_s == pytest.approx(0.1)
    assert m.throughput_iqr == pytest.approx(64 / 0.1 - 64 / 0.2)   # 320 samples/s
    assert m.median_throughput == pytest.approx(64 / 0.15)
    assert m.cpu_share is None                        # older results carry no contention record
    m2 = aggregate([_rank(0, contention={"cpu_seconds": 0.96}, in_force={"num_threads": 2})], 100.0)
    assert m2.cpu_share == pytest.approx(0.75)
    assert m.startup_s == pytest.approx(3.5)          # slowest rank to its first step
    assert m.timed_share == pytest.approx(0.64 / 10.2)   # of launch -> the last rank's window end
    assert m.peak_rss_mb == (0, 3)                    # 1000 bytes and 3 MiB, in MiB
    assert (m.timed_steps, m.samples, m.window_s) == (4, 256, 0.64)


def test_aggregate_rejects_failed_rank0():
    with pytest.raises(ValueError, match="bad_config"):
        aggregate([{"status": "bad_config", "reason": "threads: planned 2, in force 1"}], 0.0)
    with pytest.raises(ValueError):
        aggregate([], 0.0)


def test_ratio_stats_interleaved_rounds():
    r = ratio_stats([16.2, 16.0, 16.4, 15.8], [10.0, 10.0, 10.0, 10.0])
    assert r.ratios == pytest.approx((1.62, 1.60, 1.64, 1.58))
    assert r.median == pytest.approx(1.61)
    assert (r.q1, r.q3) == (pytest.approx(1.595), pytest.approx(1.625))
    assert r.spread == pytest.approx(0.015)
    assert r.n == 4
    assert r.describe().startswith("speedup 1.61x (±0.0")


def test_ratio_stats_errors():
    with pytest.raises(ValueError, match="pair up"):
        ratio_stats([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        ratio_stats([], [])
    with pytest.raises(ValueError):
        ratio_stats([1.0], [0.0])


def test_busy_threshold_and_the_run_text_says_so():
    from autotune.commands.common import describe_measurement
    from autotune.measure.stats import BUSY_CPU_SHARE, busy
    assert BUSY_CPU_SHARE == 0.8
    assert busy(0.75) and not busy(0.8) and not busy(0.97) and not busy(None)
    m = aggregate([_rank(0, contention={"cpu_seconds": 0.96}, in_force={"num_threads": 2})], 100.0)
    text = describe_measurement(m)
    assert "cpu share: 0.75 of rank 0's threads' CPU time over the window [busy" in text
    quiet = aggregate([_rank(0, contention={"cpu_seconds": 1.25}, in_force={"num_threads": 2})],
                      100.0)
    assert "cpu share: 0.98" in describe_measurement(quiet)
    assert "busy" not in describe_measurement(quiet)
