"""The simulated data-bound GPU machine (benchmarks/replay/data_stage.py): the model reproduces the GPU
machine's measured points, and the guide that reads the step's split reaches 95% of the best in
at most 5 trials where the guide of before, on the same table without splits, does not."""
from __future__ import annotations

import pytest

from autotune.config import Config
from benchmarks.replay.data_stage import blind, landscape, step, trials_to


def test_the_model_gives_back_the_gpu_machines_measured_points():
    default, _ = step(Config(device="cuda", backend="nccl"))
    fed, _ = step(Config(device="cuda", backend="nccl", dataloader_workers=4, pin_memory=True))
    tuned, split = step(Config(device="cuda", backend="nccl", dataloader_workers=4,
                               pin_memory=True, precision="bf16", channels_last=True,
                               global_batch=128))
    assert default == pytest.approx(339.0, rel=0.03)
    assert fed / default == pytest.approx(2.59, rel=0.03)
    assert tuned / default == pytest.approx(4.97, rel=0.03)
    assert split["data"] > 0.4 * sum(split.values())     # still waiting on data there


def test_the_guide_that_reads_the_split_finds_the_feed_first():
    land = landscape()
    seen = trials_to(land, seeds=1)
    before = trials_to(blind(land), seeds=1)
    assert seen["median"] is not None and seen["median"] <= 5
    assert before["median"] is None or before["median"] > 5
