"""`autotune compare`: interleaved A B, B A rounds through verification's own interleave(), the
ratio statistics of measure.ratio_stats, "inconclusive" when the spread crosses 1.0, bad input as
one line, and real short runs of tcmalloc against the default allocator (structure and
statistics checked, never the timing)."""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from autotune.result import Outcome, TrialResult
from autotune.cli import main
from autotune.recommend.compare import Comparison, Window, compare, describe
from autotune.config import Config
from autotune.measure.stats import ratio_stats
from benchmarks.timed.intel_ab import compare_argv
from results_study import live_topology

A, B = Config(allocator="tcmalloc"), Config()


class Machine:
    """Throughputs by configuration and by how many windows ran before (a machine that slows
    down over time, which the interleaving must cancel); window 3 of B crashes when asked."""

    def __init__(self, speed: dict[str, float], crash_at: int | None = None) -> None:
        self.speed, self.crash_at, self.calls = speed, crash_at, []

    def __call__(self, config: Config, mode: str) -> TrialResult:
        self.calls.append(config)
        n = len(self.calls)
        if n == self.crash_at:
            return TrialResult(outcome=Outcome.CRASH, reason="rank 0 exited with signal 11", seconds=1)
        return TrialResult(outcome=Outcome.OK, throughput=self.speed[config.allocator] * (1 - 0.01 * n),
                           seconds=1, cpu_share=0.9 + 0.01 * n)


def test_rounds_alternate_and_the_ratio_is_verifications():
    machine = Machine({"tcmalloc": 130.0, "default": 100.0})
    c = compare(A, B, machine, rounds=4)
    assert machine.calls == [A, B, B, A, A, B, B, A]
    assert [(w.side, w.round) for w in c.windows] == [("A", 1), ("B", 1), ("B", 2), ("A", 2),
                                                      ("A", 3), ("B", 3), ("B", 4), ("A", 4)]
    a = [w.throughput for w in c.side("A")]
    b = [w.throughput for w in c.side("B")]
    assert c.stats == ratio_stats(a, b)
    assert c.stats.ratios[0] == pytest.approx(130 * 0.99 / (100 * 0.98))
    assert c.verdict == "A is faster"
    data = c.to_json()
    assert data["verdict"] == "A is faster" and data["rounds"] == 4
    assert data["median"] == c.stats.median and data["spread"] == c.stats.spread
    assert [w["cpu_share"] for w in data["windows"]][:2] == [pytest.approx(0.91),
                                                             pytest.approx(0.92)]
    assert data["cpu_share"]["A"]["n"] == 4
    text = describe(c)
    assert "A: allocator=tcmalloc" in text and "B: allocator=default" in text
    assert "round 2 B:" in text and "cpu share 0.93" in text
    assert f"median {c.stats.median:.3f}x (±{c.stats.spread:.3f}" in text
    # settled and quiet: the verdict carries the figure, once
    assert text.endswith("\nverdict: A is faster, verified 1.30x over B (95% interval "
                         "1.28-1.33x, 4 rounds)")
    assert text.count("95% interval") == 1


def test_a_spread_that_crosses_one_is_inconclusive():
    assert ratio_stats([1.1, 0.9, 1.05, 0.95], [1, 1, 1, 1]).inconclusive
    assert not ratio_stats([1.1, 1.2, 1.05, 1.15], [1, 1, 1, 1]).inconclusive
    assert not ratio_stats([0.8, 0.9], [1, 1]).inconclusive
    assert ratio_stats([1.5], [1]).inconclusive            # one round: no spread at all
    c = compare(A, B, Machine({"tcmalloc": 100.0, "default": 100.0}), rounds=4)
    assert c.verdict == "inconclusive"    # equal speeds: the drift alone decides each round
    assert "the spread crosses 1.0" in describe(c)
    slow = compare(A, B, Machine({"tcmalloc": 70.0, "default": 100.0}), rounds=3)
    assert slow.verdict == "B is faster"


def test_a_failed_window_drops_its_round_and_is_shown():
    c = compare(A, B, Machine({"tcmalloc": 130.0, "default": 100.0}, crash_at=3), rounds=3)
    assert [w.outcome for w in c.windows].count(Outcome.CRASH) == 1
    assert c.stats.n == 2                  # round 2 had no B
    assert "round 2 B: crash (rank 0 exited with signal 11)" in describe(c)
    none = Comparison(a=A, b=B, windows=(Window(side="A", round=1, outcome=Outcome.CRASH),))
    assert none.stats is None and none.verdict == "no complete round"
    with pytest.raises(ValueError, match="side"):
        Window(side="C", round=1, outcome=Outcome.OK)


def test_intel_ab_is_a_wrapper_over_compare():
    python, argv = compare_argv(["--python", "/opt/py", "--a", "ipex=on", "--b", "ipex=off",
                                 "--rounds", "3"])
    assert python == "/opt/py"
    assert argv == ["/opt/py", "-m", "autotune", "compare", "--a", "ipex=on", "--b", "ipex=off",
                    "--rounds", "3"]


@pytest.mark.parametrize("argv, expect", [
    (["--a", "allocator=nosuch"], "allocator='nosuch' is not valid"),
    (["--a", "nosuch=1"], "unknown knob 'nosuch'"),
    (["--a", "backend=nccl"], "configuration A cannot run here: backend nccl"),
    (["--a", "threads=1", "--b", "nproc=64"], "configuration B cannot run here"),
    (["--a", "threads=1", "--metric", "x"], "--metric reads a script's output"),
])
def test_bad_input_is_one_line_and_runs_nothing(tmp_path, capsys, argv, expect):
    rc = main(["compare", *argv, "--results", str(tmp_path / "res")])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and expect in err, err
    assert not (tmp_path / "res").exists()




def test_windows_whose_cores_other_processes_took_are_named_and_unsettle_the_ratio():
    class Loaded(Machine):
        def __call__(self, config, mode):
            ev = super().__call__(config, mode)
            return dataclasses.replace(ev, outside_share=0.42)
    c = compare(A, B, Loaded({"tcmalloc": 130.0, "default": 100.0}), rounds=3)
    assert c.disturbed_windows == 6 and not c.settling.settled
    text = describe(c)
    assert "42% of its cores taken by other processes [disturbed]" in text
    assert "ratio: unsettled over 3 rounds; other processes took 42% of the trial cores" in text
    assert text.endswith("compare again when the machine is quiet")
    data = c.to_json()
    assert data["outside_share"] == [0.42] * 6 and data["settling"]["settled"] is False


def test_two_rounds_that_disagree_name_no_winner():
    """The GPU machine's 16 cores, 2026-11-26: the same configuration as A and as B, two rounds
    (A 2160.6 then B 1854.1; B 2209.0 then A 2170.4). The interpolated quartiles of the ratios
    1.165 and 0.983 both lie above 1.0, and `compare` said "A is faster" of A against itself."""
    windows = [Window(side="A", round=1, outcome=Outcome.OK, throughput=2160.6, cpu_share=1.0),
               Window(side="B", round=1, outcome=Outcome.OK, throughput=1854.1, cpu_share=1.0),
               Window(side="B", round=2, outcome=Outcome.OK, throughput=2209.0, cpu_share=1.0),
               Window(side="A", round=2, outcome=Outcome.OK, throughput=2170.4, cpu_share=1.0)]
    c = Comparison(a=A, b=A, windows=tuple(windows))
    assert c.stats.q1 > 1.0                       # what the old rule read as a winner
    assert c.verdict == "inconclusive"
    assert "neither side was faster in 3 of 4 rounds" in describe(c)
    assert ratio_stats([1.2, 0.98, 1.3, 1.25], [1, 1, 1, 1]).mostly(above=True)   # 3 of 4
    assert not ratio_stats([1.2, 0.98, 1.3], [1, 1, 1]).mostly(above=True)        # 2 of 3
