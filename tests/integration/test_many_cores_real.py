"""The many-core landscape recorded here for real (benchmarks/landscapes/many_cores.py, issue 45): a tiny
budget on this 2-core machine, real trials and a real quality run, then what the 16-core one
will go through: the refusals, the refit and the search replayed on it."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from autotune.config import Config
from autotune.probe import probe
from benchmarks.landscapes import two_machines
from benchmarks.landscapes.checks import capture_fingerprint, load_checked
from benchmarks.landscapes.table import DATA, Landscape
from benchmarks.replay import recorded
from paths import REPO

pytestmark = pytest.mark.scenario


def test_a_tiny_landscape_of_this_machine_is_recorded_then_refitted_and_searched(tmp_path):
    here = probe(collect_capabilities=False).fingerprint()
    out = tmp_path / f"landscape-{here}.json"
    blocks = "layouts,ccl" if "ccl" in probe().capabilities.backends else "layouts"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.landscapes.many_cores", "--record", "--out", str(out),
         "--budget", "170s", "--window", "2", "--seeds", "1", "--quality-samples", "512",
         "--blocks", blocks], cwd=REPO, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "estimated" in done.stdout and "many_cores:" in done.stdout
    land = Landscape.load(out)
    assert capture_fingerprint(land) == land.data["fingerprint"] == here
    assert land.data["plan"]["blocks"] == blocks.split(",")
    windows = land.data["windows"]
    default = Config().key()
    ran = [b for b in blocks.split(",") if b not in land.data["plan"]["skipped"]]
    assert ran, done.stdout           # at least one block fitted 170 s, even on a busy machine
    for block in ran:
        mine = [w for w in windows if w["block"] == block]
        assert mine[0]["key"] == default and mine[0]["round"] == 0      # D opens every block
        for key in {w["key"] for w in mine} - {default}:
            rounds = [w["round"] for w in mine if w["key"] == key]
            assert rounds == [1, 2] or land.rows[key]["outcome"] != "ok"   # two windows apart
            assert land.rows[key]["x_default"] or land.rows[key]["outcome"] != "ok"
    assert land.rows[default]["outcome"] == "ok" and len(land.rows[default]["windows"]) >= 2
    quality = land.accuracy["32:fp32"]
    assert quality["outcome"] == "ok" and quality["seeds"] == [0] and 0 < quality["accuracy"] <= 1
    # what the 16-core landscape will go through: checked, predicted from the Zen 5 table, and
    # the search replayed on it with the gaps the model's
    checked, fp = load_checked(str(out))
    assert fp == here
    pred = two_machines.predict(str(DATA / "landscape-115e441fefef.json"), str(out),
                                bandwidths={}, rounds=1)
    assert set(pred["per_config"]) <= set(land.rows) and pred["layout_winner"]
    res = recorded.replay(str(out), seeds=1, rounds=1, phase2_s=600, say=lambda *a: None)
    assert res["fill"] == "model" and res["trials_95"]["autotune"] >= 1
    json.dumps(res, default=str)
