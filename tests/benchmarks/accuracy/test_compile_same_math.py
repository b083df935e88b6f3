"""benchmarks/accuracy/compile_same_math.py's verdict on seed-paired quality runs, with literal
values (its real runs: `python3 -m benchmarks.accuracy.compile_same_math --workloads mlp
--seeds 2 --samples 256` checks that it starts, in about a minute)."""
from __future__ import annotations

import pytest

from benchmarks.accuracy.compile_same_math import agree, describe, verdicts


def test_pairs_that_differ_less_than_eagers_seeds_agree_within():
    eager = [0.80, 0.82, 0.78, 0.81]          # seed sd 0.0171
    compiled = [0.801, 0.819, 0.781, 0.811]   # +0.001, -0.001, +0.001, +0.001
    a = agree(eager, compiled)
    assert a["verdict"] == "within" and a["pairs"] == 4
    assert a["mean_diff"] == pytest.approx(0.0005)
    assert a["eager_seed_sd"] == pytest.approx(0.01708, abs=1e-5)
    assert describe("cnn", a).startswith("cnn: compiled - eager +0.05 pp (95% [")


def test_a_compiled_run_that_loses_more_than_a_seed_is_beyond_and_few_pairs_show_nothing():
    eager = [0.80, 0.801, 0.799, 0.80]
    assert agree(eager, [q - 0.05 for q in eager])["verdict"] == "beyond"
    assert agree([0.80, 0.81], [0.70, 0.85])["verdict"] == "not shown"   # wide interval
    assert agree([0.8], [0.8]) == {"pairs": 1, "verdict": "not shown"}


def test_verdicts_pair_runs_by_seed_and_length():
    rows = [{"workload": "mlp", "seed": s, "arm": a, "samples": 256, "quality": q}
            for s, a, q in ((0, "eager", 0.5), (0, "compiled", 0.5), (1, "eager", 0.6),
                            (1, "compiled", 0.6), (2, "eager", 0.7))]   # seed 2 has no pair
    rows.append({"workload": "mlp", "seed": 3, "arm": "eager", "samples": 512, "quality": 0.1})
    assert verdicts(rows, 256)["mlp"]["pairs"] == 2
