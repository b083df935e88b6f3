"""The accuracy gate: samples over seeds, the one-sided Welch test, Student t quantiles, the
single-run gate. Literal numbers."""
import pytest

from autotune.quality import gate as Q


def test_sample_mean_and_sd():
    s = Q.Sample((0.90, 0.92, 0.94))
    assert s.mean == pytest.approx(0.92)
    assert s.sd == pytest.approx(0.02)
    assert Q.Sample((0.5,)).sd == 0.0


def test_gate_accepts_a_drop_within_tolerance_plus_noise():
    d = Q.Sample((0.926, 0.934, 0.922))
    c = Q.Sample((0.915, 0.925, 0.910))
    v = Q.gate(d, c, 1.0)
    assert v.drop_pp == pytest.approx(1.0667, abs=1e-3)
    assert not v.reject          # 1.07 pp is less than 1 pp + t * SE
    assert v.margin_pp < 0


def test_gate_rejects_a_drop_far_beyond_the_noise():
    d = Q.Sample((0.926, 0.934, 0.922))
    c = Q.Sample((0.80, 0.81, 0.79))
    v = Q.gate(d, c, 1.0)
    assert v.reject and v.margin_pp > 0
    assert "exceeds" in v.describe()


def test_gate_needs_more_evidence_when_the_noise_is_large():
    # the same 3-point mean drop: rejected with tight seeds, accepted with scattered ones
    tight = Q.gate(Q.Sample((0.90, 0.901, 0.899)), Q.Sample((0.87, 0.871, 0.869)), 1.0)
    loose = Q.gate(Q.Sample((0.90, 0.95, 0.85)), Q.Sample((0.87, 0.92, 0.82)), 1.0)
    assert tight.reject and not loose.reject
    assert loose.noise_pp > 5


def test_gate_on_a_lower_is_better_metric():
    v = Q.gate(Q.Sample((1.00, 1.01, 0.99)), Q.Sample((1.30, 1.31, 1.29)), 1.0,
               lower_is_better=True)
    assert v.reject and v.drop_pp == pytest.approx(30.0)


def test_t_quantiles_and_welch_df():
    assert Q.t95(2) == pytest.approx(2.920)
    assert Q.t95(4.7) == pytest.approx(2.132)        # rounded down: the cautious side
    assert Q.t95(1000) == pytest.approx(1.645)
    assert Q.welch_df(1.0, 1.0, 3, 3) == pytest.approx(4.0)


def test_single_run_gate_uses_the_default_launchs_spread_over_seeds():
    from autotune.quality.gate import Sample, single_run_gate, t95
    default = Sample((0.80, 0.81, 0.82))                 # mean 0.81, sd 0.01
    noise = t95(2) * 1.0 * (1 / 3 + 1) ** 0.5             # points
    v = single_run_gate(default, 0.79, 1.0)              # 2 pp lower: within 1 pp + noise
    assert not v.reject and v.drop_pp == pytest.approx(2.0) and v.noise_pp == pytest.approx(noise)
    far = single_run_gate(default, 0.81 - (1.0 + noise + 0.5) / 100, 1.0)
    assert far.reject and far.margin_pp == pytest.approx(0.5)
    with pytest.raises(ValueError):
        single_run_gate(Sample((0.8,)), 0.8, 1.0)

