"""Which configurations train alike, and the training arithmetic behind it: learning-rate
rules, batch splitting with accumulation, math classes. Literal numbers."""
import pytest

from autotune.config import Config, parse_sets
from autotune.errors import ConfigError
from autotune import training as T
from autotune.quality import math_class as Q


def test_lr_rules_scale_from_the_reference_batch():
    assert T.lr_scale("linear", 128, 32) == 4.0
    assert T.lr_scale("sqrt", 128, 32) == 2.0
    assert T.lr_scale("none", 128, 32) == 1.0
    assert T.lr_scale("linear", 16, 32) == 0.5
    with pytest.raises(ConfigError, match="lr_rule='cubic'"):
        T.lr_scale("cubic", 64, 32)


def test_linear_warmup_ramps_from_the_reference_rate_to_the_scaled_one():
    rates = [T.lr_at(i, base_lr=0.1, scale=4.0, warmup_steps=4) for i in range(6)]
    assert rates == pytest.approx([0.175, 0.25, 0.325, 0.4, 0.4, 0.4])
    # a scaled-down rate starts where it ends: nothing to warm up to
    assert T.lr_at(0, base_lr=0.1, scale=0.5, warmup_steps=4) == pytest.approx(0.05)


def test_split_keeps_the_global_batch_and_accumulates_below_the_share():
    assert T.split_batch(32, 1) == (32, 1)
    assert T.split_batch(32, 2) == (16, 1)
    assert T.split_batch(64, 2, 8) == (8, 4)        # 2 ranks x 4 micro-batches x 8 = 64
    with pytest.raises(ConfigError, match="cannot be split over nproc=3"):
        T.split_batch(32, 3)
    with pytest.raises(ConfigError, match="must divide each rank's share"):
        T.split_batch(32, 2, 12)


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

