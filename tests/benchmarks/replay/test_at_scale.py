"""benchmarks/replay/at_scale.py's options: trial length, machines from a capture (issue 27)."""
from __future__ import annotations

import json

import pytest

from autotune.config import Config
from benchmarks.landscapes import model as LM
from benchmarks.landscapes import model_machines as MM
from benchmarks.replay import at_scale

FOUR = MM.synthetic_topology(sockets=1, node_cores=[[4]], distances=[[10]], model="four")
HW = LM.Hardware(name="four", node_bandwidth_gbs=100.0)
DESKTOP = str(MM.FIXTURES / "desktop-8c16t")   # a captured 8-core, 16-thread desktop, one node


def test_trial_seconds_stretch_every_trial_and_quality_run_alike():
    land = MM.model_landscape("four", FOUR, HW)
    base = at_scale.default_trial_seconds(land)
    assert 8.0 < base < 9.0          # 2.7 s start-up + 3 steps + 5 s window + 0.5 s teardown
    long = at_scale.with_trial_seconds(land, 60.0)
    assert at_scale.default_trial_seconds(long) == pytest.approx(60.0)
    factor = 60.0 / base
    for key, row in land.rows.items():
        if row.get("seconds"):
            assert long.rows[key]["seconds"] == pytest.approx(row["seconds"] * factor)
            assert long.rows[key]["throughput"] == row["throughput"]   # only the clock changes
    for key, acc in land.accuracy.items():
        assert long.accuracy[key]["seconds"] == pytest.approx(acc["seconds"] * factor)
    assert land.rows[Config().key()]["seconds"] == pytest.approx(base)  # the original is intact
    assert at_scale.with_trial_seconds(land, None) is land
    with pytest.raises(ValueError, match="> 0"):
        at_scale.with_trial_seconds(land, 0.0)


def test_minute_long_trials_are_reported_in_trials_and_simulated_minutes(tmp_path, capsys):
    """On the captured desktop (a search of 8 s here), not a modelled server (24 s): what is
    checked is the clock, and the clock is the same on any machine."""
    out = tmp_path / "scale.json"
    assert at_scale.main(["--capture", DESKTOP, "--bandwidth", "40", "--seeds", "1",
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


def test_a_captured_machine_is_simulated_without_code(tmp_path, capsys):
    out = tmp_path / "scale.json"
    assert at_scale.main(["--capture", DESKTOP, "--bandwidth", "40", "--seeds", "1",
                                 "--out", str(out)]) == 0
    assert "| capture-desktop-8c16t |" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert [r["machine"] for r in data["rows"]] == ["capture-desktop-8c16t"]  # only it
    row = data["rows"][0]
    assert data["capture"] == DESKTOP and data["bandwidth_gbs"] == 40
    assert row["launchable"] > 0 and row["oracle"] > 0
    assert row["trials_95"]["autotune"] <= row["launchable"]


def test_the_bandwidth_given_is_the_models_per_node_bandwidth():
    name, topo, hw = MM.capture_machine(DESKTOP, 40.0)
    assert name == "capture-desktop-8c16t" and len(topo.usable_cores()) == 8
    assert hw.node_bandwidth_gbs == 40.0
    # 8 single-thread ranks on one node: memory-bound at 1 GB/s, not at 400 GB/s
    c = Config(nproc=8, ranks_per_numa_node=8, threads=1, binding="taskset", global_batch=128)
    slow = LM.throughput(c, topo, MM.capture_machine(DESKTOP, 1.0)[2], LM.Params())
    fast = LM.throughput(c, topo, MM.capture_machine(DESKTOP, 400.0)[2], LM.Params())
    assert slow < 0.5 * fast


@pytest.mark.parametrize("argv, message", [
    (["--capture", "{tmp}", "--bandwidth", "40"], "not a /sys capture"),
    (["--capture", "{tmp}/missing", "--bandwidth", "40"], "not a /sys capture"),
    (["--capture", DESKTOP, "--bandwidth", "0"], "--bandwidth must be more than 0"),
    (["--capture", DESKTOP, "--bandwidth", "-5"], "--bandwidth must be more than 0"),
    (["--capture", DESKTOP], "go together"),
    (["--bandwidth", "40"], "go together"),
    (["--trial-seconds", "0"], "--trial-seconds must be more than 0"),
    (["--seeds", "0"], "--seeds must be at least 1"),
])
def test_bad_input_is_one_line_and_exit_2_and_writes_nothing(tmp_path, capsys, argv, message):
    out = tmp_path / "scale.json"
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert at_scale.main(argv + ["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.startswith("search_at_scale: error:")
    assert not out.exists()


def test_the_replay_ends_losing_trials_early_and_saves_simulated_time():
    from benchmarks.landscapes.table import SimClock
    from benchmarks.replay.efficiency import early_stopping
    land = MM.model_landscape("four", FOUR, HW)
    oracle, where = land.oracle()
    best = Config.from_dict(where["config"])
    slow = Config()   # one unbound rank with torch's threads: far below the best here
    assert land.rows[slow.key()]["throughput"] < 0.8 * oracle
    clock = SimClock()
    evaluate = early_stopping(land, clock, seed=0)
    first = evaluate(slow, "throughput")         # no leader given (a reference): whole window
    assert first.seconds == pytest.approx(land.rows[slow.key()]["seconds"])
    assert not first.stopped_early
    lead = evaluate(best, "throughput", leader=land.rows[slow.key()]["throughput"]).throughput
    t0 = clock.t
    again = evaluate(slow, "throughput", leader=lead)   # behind the leader: ends after 2 windows
    assert again.stopped_early.startswith("stopped early after 2 windows")
    full = land.rows[slow.key()]["seconds"]
    assert again.seconds == pytest.approx(full - 3 / 5 * 5.0)   # 3 of 5 one-second windows saved
    assert clock.t - t0 == pytest.approx(again.seconds)
    assert again.throughput < 0.95 * oracle
    acc = evaluate(slow, "accuracy")             # quality runs are never shortened
    assert acc.seconds == land.accuracy[f"{slow.global_batch_size}:{slow.precision}"]["seconds"]
