"""The benchmarks that run real trials start, resume and write their tables (tiny settings).
(The replays are in tests/benchmarks/replay/test_efficiency.py.)
"""
from __future__ import annotations

import json
import pytest
from benchmarks.landscapes import record
from benchmarks.timed import overhead, speedup


@pytest.mark.slow
@pytest.mark.scenario   # CI time (12 s): a benchmark tool, not autotune; runs with the scenarios
def test_record_two_real_trials_and_resume(tmp_path):
    path = tmp_path / "land.json"
    args = ["--seconds", "1", "--limit", "1", "--quality-samples", "256",
            "--out", str(path)]
    assert record.main(args) == 0
    first = json.loads(path.read_text())
    launched = [r for r in first["rows"].values() if r["outcome"] != "infeasible"]
    assert len(launched) == 1 and launched[0]["role"] == "reference:default"
    assert first["topology"]["fingerprint"] == first["fingerprint"]
    assert "32:fp32" in first["accuracy"] and first["library_versions"]["torch"]
    assert record.main(args) == 0  # resumes: the default launch is not run again
    second = json.loads(path.read_text())
    key = next(k for k, r in first["rows"].items() if r["role"] == "reference:default")
    assert second["rows"][key] == first["rows"][key]
    assert sum(r["outcome"] != "infeasible" for r in second["rows"].values()) == 2


@pytest.mark.slow
def test_overhead_with_two_short_repeats(tmp_path, capsys):
    out = tmp_path / "oh.json"
    assert overhead.main(["--repeats", "2", "--seconds", "1", "--set", "threads=1",
                          "--replay-trials", "10", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["repeat"]["ok"] == 2 and data["repeat"]["startup_s"]["median"] > 0
    assert data["own"]["launched"] == 10 and data["own"]["own_s_per_launched"] > 0
    assert "run-to-run throughput CV" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.scenario   # CI time (12 s): a benchmark tool; compare and verify are tested in CI
def test_speedup_one_round_against_a_given_config(tmp_path, capsys):
    out = tmp_path / "sp.json"
    assert speedup.main(["--set", "threads=1", "--rounds", "1", "--seconds", "1",
                         "--no-oracle", "--workdir", str(tmp_path / "w"), "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["ratios"]["default"]["rounds"] == 1
    assert "run_cpu" in data["ratios"]  # measured, or the reason it could not be
    assert (tmp_path / "w" / "prefix" / "lib" / "libtcmalloc.so").is_symlink()
    assert "recommendation vs" in capsys.readouterr().out
