"""benchmarks/timed/window_length.py's summary of its rounds, with literal rows (its real runs:
`python3 -m benchmarks.timed.window_length --rounds 12`, ~5 minutes on 2 cores)."""
from __future__ import annotations

import math

import pytest

from benchmarks.timed.window_length import _expected_rounds, describe, main, summarize


def rows_of(length, pairs, wall=(1.0, 1.0)):
    out = []
    for r, (d, c) in enumerate(pairs):
        out += [{"round": r, "length": length, "side": "D", "throughput": d, "wall_s": wall[0],
                 "outcome": "ok"},
                {"round": r, "length": length, "side": "C", "throughput": c, "wall_s": wall[1],
                 "outcome": "ok"}]
    return out


def test_a_steady_ratio_settles_in_the_asked_rounds_and_a_wide_one_does_not():
    steady = rows_of(2.0, [(100.0, 200.0), (110.0, 220.0), (90.0, 180.0), (100.0, 200.0)],
                     wall=(2.2, 2.3))
    wide = rows_of(1.0, [(100.0, 150.0), (100.0, 250.0), (100.0, 200.0), (100.0, 180.0)])
    s = summarize(steady + wide, draws=200)
    assert s["2"]["ratio"] == 2.0 and s["2"]["log_ratio_sd"] == 0.0
    assert s["2"]["settled_share"][3] == 1.0 and s["2"]["expected_rounds"] == 3.0
    assert s["2"]["round_s"] == 4.5 and s["2"]["seconds_to_settle"] == 13.5
    # each side's own spread, apart from the ratio's
    assert s["2"]["cv_default"] == pytest.approx(0.0816, abs=1e-4)
    assert s["1"]["ratio"] == 1.9 and s["1"]["settled_share"][3] < 0.5
    assert s["1"]["expected_rounds"] > 3.0
    assert describe(s)[0].startswith("1 s: ratio 1.900x, round-to-round spread ")


def test_a_round_missing_a_side_is_left_out_and_too_few_rounds_say_so():
    rows = rows_of(3.0, [(100.0, 200.0), (100.0, 210.0), (100.0, 190.0)])
    rows[1] = dict(rows[1], outcome="crash", throughput=None)
    s = summarize(rows, draws=50)
    assert s == {"3": {"rounds": 2}}
    assert describe(s) == ["3 s: 2 whole round(s), too few to say"]


def test_expected_rounds_add_one_round_at_a_time_until_the_last_count():
    assert _expected_rounds({3: 1.0, 4: 1.0}) == 3.0
    assert _expected_rounds({3: 0.5, 4: 1.0}) == 3.5
    assert math.isclose(_expected_rounds({3: 0.0, 4: 0.5, 12: 0.0}), 0.5 * 4 + 0.5 * 12)


@pytest.mark.parametrize("argv", [["--rounds", "2"], ["--lengths", "0"],
                                  ["--candidate", "precision=fp64"]])
def test_bad_input_is_one_line_and_exit_2(argv, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("window_length: error: ")
