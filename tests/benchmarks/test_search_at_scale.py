"""benchmarks/search_at_scale.py's options: trial length, machines from a capture (issue 27)."""
from __future__ import annotations

import json

import pytest

from autotune.config import Config
from benchmarks import landscape_model as LM
from benchmarks import model_machines as MM
from benchmarks import search_at_scale

FOUR = MM.synthetic_topology(sockets=1, node_cores=[[4]], distances=[[10]], model="four")
HW = LM.Hardware(name="four", node_bandwidth_gbs=100.0)


def test_trial_seconds_stretch_every_trial_and_quality_run_alike():
    land = MM.model_landscape("four", FOUR, HW)
    base = search_at_scale.default_trial_seconds(land)
    assert 8.0 < base < 9.0          # 2.7 s start-up + 3 steps + 5 s window + 0.5 s teardown
    long = search_at_scale.with_trial_seconds(land, 60.0)
    assert search_at_scale.default_trial_seconds(long) == pytest.approx(60.0)
    factor = 60.0 / base
    for key, row in land.rows.items():
        if row.get("seconds"):
            assert long.rows[key]["seconds"] == pytest.approx(row["seconds"] * factor)
            assert long.rows[key]["throughput"] == row["throughput"]   # only the clock changes
    for key, acc in land.accuracy.items():
        assert long.accuracy[key]["seconds"] == pytest.approx(acc["seconds"] * factor)
    assert land.rows[Config().key()]["seconds"] == pytest.approx(base)  # the original is intact
    assert search_at_scale.with_trial_seconds(land, None) is land
    with pytest.raises(ValueError, match="> 0"):
        search_at_scale.with_trial_seconds(land, 0.0)


def test_minute_long_trials_are_reported_in_trials_and_simulated_minutes(tmp_path, capsys):
    out = tmp_path / "scale.json"
    assert search_at_scale.main(["--machines", "epyc-7763-nps4", "--seeds", "1",
                                 "--trial-seconds", "60", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "sim. min to 95%" in text and "| 60 |" in text
    data = json.loads(out.read_text())
    row = data["rows"][0]
    assert data["trial_seconds"] == 60 and row["trial_seconds"] == 60
    for k in ("autotune", "random", "grid"):
        trials, seconds = row["trials_95"][k], row["seconds_95"][k]
        # every trial is about a minute now (more ranks start a little slower, never faster)
        assert seconds >= 0.9 * 60 * trials
        lo, hi = row["seconds_95_spread"][k]
        assert lo <= seconds <= hi
    assert 0.0 <= row["success_30min"] <= 1.0
