"""benchmarks/replay/short_budgets.py on a small input: the kept-launch model and one replay."""
from __future__ import annotations

import math

import pytest

from autotune.config import Config, launch_part
from benchmarks.landscapes.synthetic import synthetic
from benchmarks.landscapes.table import SimClock
from benchmarks.replay.short_budgets import WINDOW_SHARE, KeptLaunches, main, replay


def test_a_launch_kept_running_costs_a_window_and_is_marked_as_one():
    land = synthetic("formula", seed=0)
    clock = SimClock()
    ev = KeptLaunches(land, clock)
    rows = [(Config.from_dict(r["config"]), r) for r in land.rows.values()
            if r["outcome"] == "ok" and r.get("seconds")]
    # two configurations of one launch (config.launch_part: window knobs only differ)
    base, other, row = next((a, b, rb) for i, (a, _) in enumerate(rows)
                            for b, rb in rows[i + 1:] if launch_part(a) == launch_part(b))
    first = ev(base, "throughput")
    assert first.fixed is None and ev.running(base) and ev.running(other)
    again = ev(other, "throughput")
    recorded = row["seconds"]
    assert again.seconds == pytest.approx(recorded * WINDOW_SHARE) and "wait" in again.fixed
    assert clock.t == pytest.approx(first.seconds + again.seconds)
    assert not any(ev.running(c) for c, _ in rows if launch_part(c) != launch_part(base))


def test_one_replay_reports_trials_and_what_was_left(tmp_path):
    out = replay(synthetic("formula", seed=0), 300.0, seed=0)
    assert out["trials"] >= 10 and out["stop"] in ("budget", "stagnated")
    assert out["trials_95"] == math.inf or out["trials_95"] <= out["trials"]
    assert out["unused_s"] >= 0   # never past its budget on the simulated clock
    assert main(["--seeds", "1", "--budgets", "300", "--out", str(tmp_path / "o.json")]) == 0
