"""The two recorded 2-core landscapes (benchmarks/landscapes/data/), read with today's knobs: both were
recorded before ranks_per_numa_node was called so (and the Zen 4 one before the global batch),
and a replay must still find each grid configuration's row."""
from __future__ import annotations

from benchmarks.landscapes.table import DATA, Landscape
from benchmarks.replay.efficiency import run_walk

ZEN5 = DATA / "landscape-115e441fefef.json"
ZEN4 = DATA / "landscape-d0a564b09095.json"


def test_every_grid_configuration_of_the_zen5_landscape_has_its_row():
    land = Landscape.load(ZEN5)
    assert "ranks_per_numa_node" in land.space().knobs       # recorded as nproc_per_node
    assert land.missing() == 0 and sum(1 for _ in land.grid_rows()) == 432


def test_a_grid_walk_replays_both_recorded_landscapes():
    for path in (ZEN5, ZEN4):
        land = Landscape.load(path)
        oracle, _ = land.oracle()
        walked = run_walk(land, list(land.space().grid()), oracle, 1.0)
        assert walked["trials_95"] <= walked["launched"] and walked["best_fraction"] >= 0.99
