"""The benchmarks start and write their tables (the measurements themselves are not tests:
docs/benchmarks.md has the commands and the figures). Tiny settings throughout."""
from __future__ import annotations

import json

import pytest

from benchmarks.landscapes import record, synthetic
from benchmarks.replay import efficiency


@pytest.mark.parametrize("kind", ["formula", "random"])
def test_replay_of_a_synthetic_landscape_compares_three_strategies(tmp_path, capsys, kind):
    path = tmp_path / "land.json"
    assert record.main(["--synthetic", kind, "--out", str(path)]) == 0
    out = tmp_path / "se.json"
    assert efficiency.main(["--landscape", str(path), "--seeds", "2",
                                   "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for name in ("autotune", "random", "grid", "trials@95%"):
        assert name in text
    data = json.loads(out.read_text())
    assert data["launchable"] == 540 and data["grid_size"] == 648   # cpu.yaml on 2 cores
    assert set(data["summary"]) == {"autotune", "random", "grid"}
    # every strategy finds 95% of the oracle of a complete landscape before the grid runs out
    for name in ("autotune", "random", "grid"):
        assert data["summary"][name]["trials_95"]["median"] <= data["launchable"]
    assert "SYNTHETIC" in data["verdict"]


def test_replay_uses_the_search_itself_and_never_runs_a_config_twice():
    land = synthetic.synthetic("formula")
    oracle, _ = land.oracle()
    r = efficiency.run_autotune(land, 0, oracle, 1.0)
    assert r["at_default_stop"]["stop_reason"] in ("stagnated", "budget", "exhausted")
    assert r["trials_95"] <= r["launched"] <= 542  # 540 launchable + the two references


def test_a_partial_landscape_replays_with_its_gaps_reported():
    land = synthetic.synthetic("formula")
    for key in list(land.rows)[5:150]:
        del land.rows[key]
    out = efficiency.compare(land, seeds=1)
    assert out["missing_rows"] > 0 and "PARTIAL" in out["verdict"]


