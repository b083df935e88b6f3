"""benchmarks/timed/rounds_needed.py: the verdict's odds over N rounds drawn from a pool of real
rounds, and the pool read from a stored search (a real SQLite study), with literal numbers."""
from __future__ import annotations

import json

import optuna
import pytest

from benchmarks.timed.rounds_needed import chances, main, winner_rounds


def test_rounds_that_agree_settle_and_two_far_apart_settle_only_when_drawn_alike():
    assert chances([1.05, 1.05], [2, 3], draws=200) == {
        2: {"verified": 1.0, "settled": 1.0}, 3: {"verified": 1.0, "settled": 1.0}}
    # two rounds from {1.0, 1.2}: alike half the time (settled, zero spread), else Student's t
    # with one degree of freedom spans far past ±10%
    two = chances([1.0, 1.2], [2], draws=4000, seed=1)[2]
    assert two["settled"] == two["verified"] == pytest.approx(0.5, abs=0.03)


def test_more_rounds_verify_more_often_at_the_slow_starts_spread():
    # the first eight 4-minute slow-start searches' quiet rounds
    # (benchmarks/results/slow_start_rounds_zen5_2026-11-29.json holds them and two more)
    pool = [1.133, 1.049, 1.044, 1.039, 1.029, 1.184, 1.058, 1.042, 1.069, 1.065, 1.066, 1.049,
            1.083, 1.097, 1.052, 1.103, 1.071, 1.041, 1.017, 1.043, 1.015, 1.03, 1.011, 1.141,
            1.054, 1.041, 1.077, 1.078]
    got = chances(pool, [3, 4, 5], draws=3000)
    assert got[3]["verified"] < got[4]["verified"] < got[5]["verified"]
    assert 0.6 < got[3]["verified"] < 0.8 and got[4]["verified"] > 0.8


def test_a_stored_search_gives_its_winners_quiet_rounds(tmp_path, capsys):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path}/autotune.db", study_name="s")
    study.set_user_attr("recommendation", {
        "headline": "verified speedup 1.10x over the default launch",
        "candidates": [{"role": "search", "config": {"nproc": 2}, "ratios": [1.1, 1.6, 1.08],
                        "outside_share": [0.01, 0.4, None]},      # round 2: a hog took 40%
                       {"role": "reference:run_cpu", "config": {}, "ratios": [1.0, 1.0, 1.0]}]})
    got = winner_rounds(str(tmp_path))
    assert got["ratios"] == [1.1, 1.08] and got["role"] == "search" and got["study"] == "s"
    out = tmp_path / "pool.json"
    assert main(["--studies", str(tmp_path), "--rounds", "2", "--draws", "50",
                 "--out", str(out)]) == 0
    stored = json.loads(out.read_text())
    assert stored["searches"][0]["ratios"] == [1.1, 1.08] and "2" in stored["shares"]
    assert main(["--pool", str(out), "--rounds", "2", "--draws", "50"]) == 0
    assert "2 quiet rounds from 1 search," in capsys.readouterr().out
    empty = tmp_path / "empty"
    optuna.create_study(storage=f"sqlite:///{empty}.db", study_name="e")
    with pytest.raises(SystemExit, match="no verified recommendation"):
        winner_rounds(f"sqlite:///{empty}.db")
