"""The arithmetic of quality evidence: learning-rate rules, batch splitting with accumulation,
the noise-floor gate, the gradient noise scale, goodput and time to target. Literal numbers."""
import math

import pytest

from autotune.measure import quality as Q
from autotune.config import Config, parse_sets
from autotune.errors import ConfigError


def test_lr_rules_scale_from_the_reference_batch():
    assert Q.lr_scale("linear", 128, 32) == 4.0
    assert Q.lr_scale("sqrt", 128, 32) == 2.0
    assert Q.lr_scale("none", 128, 32) == 1.0
    assert Q.lr_scale("linear", 16, 32) == 0.5
    with pytest.raises(ConfigError, match="lr_rule='cubic'"):
        Q.lr_scale("cubic", 64, 32)


def test_linear_warmup_ramps_from_the_reference_rate_to_the_scaled_one():
    rates = [Q.lr_at(i, base_lr=0.1, scale=4.0, warmup_steps=4) for i in range(6)]
    assert rates == pytest.approx([0.175, 0.25, 0.325, 0.4, 0.4, 0.4])
    # a scaled-down rate starts where it ends: nothing to warm up to
    assert Q.lr_at(0, base_lr=0.1, scale=0.5, warmup_steps=4) == pytest.approx(0.05)


def test_split_keeps_the_global_batch_and_accumulates_below_the_share():
    assert Q.split_batch(32, 1) == (32, 1)
    assert Q.split_batch(32, 2) == (16, 1)
    assert Q.split_batch(64, 2, 8) == (8, 4)        # 2 ranks x 4 micro-batches x 8 = 64
    with pytest.raises(ConfigError, match="cannot be split over nproc=3"):
        Q.split_batch(32, 3)
    with pytest.raises(ConfigError, match="must divide each rank's share"):
        Q.split_batch(32, 2, 12)


def test_run_rejects_a_global_batch_the_ranks_cannot_split(tmp_path, capsys):
    from autotune.cli import main
    assert parse_sets(["nproc=2", "global_batch=64"]).micro_batch == 32
    rc = main(["run", "--set", "nproc=2", "--set", "threads=1", "--set", "global_batch=33",
               "--dry-run", "--results", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "global_batch=33 cannot be split over nproc=2" in err[0]
    assert not (tmp_path / "r").exists()


def test_math_class_ignores_ranks_only_without_batchnorm():
    one, two = Config(), Config(nproc=2, threads=1)
    assert Q.math_class(one, batchnorm=False) == Q.math_class(two, batchnorm=False)
    assert Q.math_class(one, batchnorm=True) != Q.math_class(two, batchnorm=True)
    assert Q.math_class(one, batchnorm=False) != Q.math_class(Config(precision="bf16"),
                                                              batchnorm=False)
    # the lr rule only matters once the global batch leaves the reference
    assert Q.math_class(Config(lr_rule="sqrt"), batchnorm=False) == \
        Q.math_class(one, batchnorm=False)
    assert "lr_rule=sqrt" in Q.math_class(Config(global_batch=64, lr_rule="sqrt"),
                                          batchnorm=False)


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


def test_single_run_gate_uses_the_default_launchs_spread_over_seeds():
    from autotune.measure.quality import Sample, single_run_gate, t95
    default = Sample((0.80, 0.81, 0.82))                 # mean 0.81, sd 0.01
    noise = t95(2) * 1.0 * (1 / 3 + 1) ** 0.5             # points
    v = single_run_gate(default, 0.79, 1.0)              # 2 pp lower: within 1 pp + noise
    assert not v.reject and v.drop_pp == pytest.approx(2.0) and v.noise_pp == pytest.approx(noise)
    far = single_run_gate(default, 0.81 - (1.0 + noise + 0.5) / 100, 1.0)
    assert far.reject and far.margin_pp == pytest.approx(0.5)
    with pytest.raises(ValueError):
        single_run_gate(Sample((0.8,)), 0.8, 1.0)
