"""`autotune verify --quality`'s accuracy step (recommend/reverify.settle_quality): one look of
new seeds, its pairs planned before they run and judged on them alone; nothing when no number of
seeds could show the class or the time holds too few pairs; refused once the study's looks are
spent. Real SQLite; quality runs are a table of accuracies by seed."""
from __future__ import annotations

from autotune.config import Config
from autotune.quality.evidence import QualityBook
import pytest

from autotune.errors import ConfigError
from autotune.quality.looks import LOOK_ALPHA, MOST_LOOKS
from autotune.recommend.reverify import settle_quality
from autotune.result import Outcome, TrialResult
from autotune.study.storage import open_storage, open_study

BF16 = Config(precision="bf16")


def _study(tmp_path, drops: dict[int, float], default_drop: float = 0.0):
    """A study whose bf16 runs lose `drops[seed]` points (`default_drop` for seeds not listed),
    with the search's seeds 0-2 of both classes measured; (study, the runs asked for)."""
    asked = []

    def run(config, mode, *, seed=0, samples=None):
        asked.append((config.precision, seed))
        drop = drops.get(seed, default_drop) if config.precision == "bf16" else 0.0
        return TrialResult(outcome=Outcome.OK, accuracy=0.9 - drop / 100, seconds=10.0)
    study = open_study(open_storage(f"sqlite:///{tmp_path}/s.db"), "s")
    study.set_user_attr("settings", {"max_accuracy_drop": 1.0, "quality_seeds": 3,
                                     "batchnorm": True})
    book = QualityBook(study, run, batchnorm=True, tolerance_pp=1.0, seeds=(0, 1, 2))
    book.measure(Config())
    book.measure(BF16)
    asked.clear()
    return study, run, asked


def test_one_look_of_planned_new_seeds_decides(tmp_path):
    # 0.0, 1.0, 0.2 on the search's seeds: upper bound 1.61 pp, not shown; every later seed
    # loses 0.3 (the resolution floors their spread): the planned look shows it within
    study, run, asked = _study(tmp_path, {0: 0.0, 1: 1.0, 2: 0.2}, default_drop=0.3)
    v = settle_quality(study, run, BF16, time_left=lambda: 1000.0)
    assert v.accepted and v.gate.look == 2 and v.gate.alpha == LOOK_ALPHA
    seeds = [s for p, s in asked if p == "bf16"]
    assert seeds == list(v.gate.seeds) and seeds[0] == 200 and len(seeds) >= 4
    assert asked[0] == ("fp32", 200)    # the default's side first, then bf16


def test_a_failed_seed_in_the_look_ends_it_not_shown(tmp_path):
    study, run, asked = _study(tmp_path, {0: 0.0, 1: 1.0, 2: 0.2, 201: float("nan")},
                               default_drop=0.3)
    v = settle_quality(study, run, BF16, time_left=lambda: 1000.0)
    assert v.status == "not shown" and "failed on seed 201" in v.claim
    assert ("bf16", 202) not in asked


def test_a_look_past_the_studys_looks_is_refused_in_one_line(tmp_path):
    study, run, asked = _study(tmp_path, {0: 0.0, 1: 1.0, 2: 0.2}, default_drop=0.3)
    book = QualityBook(study, run, batchnorm=True, tolerance_pp=1.0, seeds=(0, 1, 2))
    for batch in (64, 128, 256, 512):          # four classes' confirmations opened a look each
        book.measure(Config(global_batch=batch), (100,), plan=4)
    asked.clear()
    with pytest.raises(ConfigError, match=f"its {MOST_LOOKS} looks at new seeds are spent"):
        settle_quality(study, run, BF16, time_left=lambda: 1000.0)
    assert asked == []


def test_a_class_no_number_of_seeds_would_show_is_left_as_it_is(tmp_path):
    study, run, asked = _study(tmp_path, {0: 1.5, 1: 0.5, 2: 1.3})   # mean 1.1 pp: past 1 pp
    v = settle_quality(study, run, BF16, time_left=lambda: 1000.0)
    assert asked == [] and v.status == "not shown"


def test_no_pair_past_the_time_left(tmp_path):
    study, run, asked = _study(tmp_path, {0: 0.0, 1: 1.0, 2: 0.2}, default_drop=0.3)
    v = settle_quality(study, run, BF16, time_left=lambda: 75.0)     # 3 pairs of 20 s: too few
    assert asked == [] and v.status == "not shown"
