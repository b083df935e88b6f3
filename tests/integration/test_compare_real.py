"""autotune compare on real runs: the allocator pair and a script's own metric.
(The pure parts are in tests/unit/recommend/test_compare.py.)
"""
from __future__ import annotations

from paths import REPO
import json
import sys
import pytest
from autotune.cli import main
from autotune.measure.stats import ratio_stats
from results_study import live_topology


@pytest.mark.slow
def test_tcmalloc_against_the_default_allocator_in_real_runs(tmp_path, capsys):
    if not live_topology().capabilities.allocators.get("tcmalloc"):
        pytest.skip("needs tcmalloc (setup.sh installs it)")
    rc = main(["compare", "--a", "allocator=tcmalloc", "--b", "allocator=default", "--set",
               "threads=1", "--rounds", "2", "--seconds", "1", "--json",
               "--results", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    data = json.loads(out)
    assert data["a"]["allocator"] == "tcmalloc" and data["b"]["allocator"] == "default"
    assert [(w["side"], w["round"], w["outcome"]) for w in data["windows"]] == [
        ("A", 1, "ok"), ("B", 1, "ok"), ("B", 2, "ok"), ("A", 2, "ok")]   # in force, per rank
    for w in data["windows"]:
        assert w["throughput"] > 0 and 0 < w["cpu_share"] <= 1.5
    by = {(w["side"], w["round"]): w["throughput"] for w in data["windows"]}
    ratios = [by["A", r] / by["B", r] for r in (1, 2)]
    stats = ratio_stats([by["A", 1], by["A", 2]], [by["B", 1], by["B", 2]])
    assert data["ratios"] == pytest.approx(ratios) and data["median"] == pytest.approx(stats.median)
    assert (data["q1"], data["q3"]) == (pytest.approx(stats.q1), pytest.approx(stats.q3))
    assert data["verdict"] == ("inconclusive" if stats.inconclusive else
                               "A is faster" if stats.q1 > 1 else "B is faster")
    assert "round 2/2: A" in err                                  # progress on stderr


@pytest.mark.slow
def test_a_script_is_compared_by_its_metric(tmp_path, capsys):
    rc = main(["compare", "--a", "threads=1", "--b", "threads=2", "--rounds", "1",
               "--results", str(tmp_path), "--metric", r"throughput: ([0-9.]+)", "--",
               sys.executable, str(REPO / "benchmarks" / "workloads" / "plain_ddp.py"),
               "--steps", "20", "--report-every", "5"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "A: threads=1" in out and "B: threads=2" in out and "per s (metric)" in out
    assert "cpu share n/a" in out          # a script reports no CPU time of its own
    assert "verdict: inconclusive (one round has no spread)" in out
