"""A kept launch's rank, waiting for its next window, says how much CPU it used meanwhile
(worker/session.py), through the launch's channel in a real checked folder; the runner judges a
report of the last window's wait, long enough, as a share of a core (run/spanning_session.py)."""
from __future__ import annotations

from autotune.run.session import IDLE_SHARE
from autotune.run.spanning_session import JUDGED_AFTER_S, _idle_share
from autotune.util.channel import Channel
from autotune.util.checked_folder import open_private
from autotune.worker.session import IDLE_REPORT_S, _next_request


def test_a_waiting_rank_reports_its_cpu_and_stops_at_its_request(tmp_path):
    folder = open_private(str(tmp_path / "trials" / "t1"), create=True)
    try:
        rank, runner = Channel(folder, "a" * 32), Channel(folder, "a" * 32)
        said: list[tuple[float, float]] = []
        assert _next_request(rank, "request.window1.json", IDLE_REPORT_S * 1.6,
                             lambda cpu, wall: said.append((cpu, wall))) is None
        assert said and all(0 <= cpu <= wall and wall >= IDLE_REPORT_S for cpu, wall in said)
        # a stop request ends the wait before any report
        runner.send("request.window2.json", {"stop": True})
        later: list[tuple[float, float]] = []
        assert _next_request(rank, "request.window2.json", 30.0,
                             lambda cpu, wall: later.append((cpu, wall))) is None
        assert later == []
    finally:
        folder.close()


def test_only_a_report_of_the_last_wait_long_enough_to_judge_counts():
    long = JUDGED_AFTER_S + 1
    assert _idle_share({"after_window": 2, "cpu_s": long, "wall_s": long}, 2) == 1.0
    assert _idle_share({"after_window": 2, "cpu_s": 0.02 * long, "wall_s": long}, 2) < IDLE_SHARE
    assert _idle_share({"after_window": 1, "cpu_s": long, "wall_s": long}, 2) == 0.0  # older
    assert _idle_share({"after_window": 2, "cpu_s": 1.0, "wall_s": 1.0}, 2) == 0.0    # too short
    assert _idle_share(None, 0) == 0.0
    for junk in ("1", None, True, -1.0, float("nan"), 1e12):
        assert _idle_share({"after_window": 0, "cpu_s": junk, "wall_s": long}, 0) == 0.0
        assert _idle_share({"after_window": 0, "cpu_s": 1.0, "wall_s": junk}, 0) == 0.0
