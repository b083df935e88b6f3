"""The model held out between two machines (benchmarks/landscapes/two_machines.py), the search replayed on a
recorded landscape (benchmarks/replay/recorded.py) and the refusals both share (checks.py), on
the two recorded 2-core landscapes standing in for two machines: Zen 5 and Zen 4."""
from __future__ import annotations

import json
import random
import subprocess

import pytest

from autotune.config import Config
from benchmarks.landscapes import two_machines
from benchmarks.landscapes.checks import LandscapeRefused, load_checked
from benchmarks.landscapes.table import DATA, Landscape
from benchmarks.replay import recorded
from paths import MACHINES

ZEN5 = str(DATA / "landscape-115e441fefef.json")
ZEN4 = str(DATA / "landscape-d0a564b09095.json")


def copy_as(tmp_path, source: str, name: str, change) -> str:
    data = json.loads(open(source).read())
    change(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def scramble(data: dict) -> None:
    """Every measurement of the file changed; what was planned left as it was."""
    rng = random.Random(7)
    for row in data["rows"].values():
        if row.get("throughput"):
            row["throughput"] *= rng.uniform(0.3, 3.0)
    for acc in data["accuracy"].values():
        acc["accuracy"] = rng.uniform(0.1, 0.9)


def test_a_prediction_reads_no_measurement_of_its_target(tmp_path):
    scrambled = copy_as(tmp_path, ZEN4, "landscape-d0a564b09095.json", scramble)
    a = two_machines.predict(ZEN5, ZEN4, bandwidths={}, rounds=1)
    b = two_machines.predict(ZEN5, scrambled, bandwidths={}, rounds=1)
    for key in ("per_config", "classes", "best", "layout_winner"):
        assert a[key] == b[key]
    assert a["fit"]["fingerprint"] == "115e441fefef" and a["target"]["fingerprint"] == "d0a564b09095"
    assert set(a["classes"]) == {"layout", "backend", "precision", "batch"}
    assert set(a["classes"]["layout"]) == {"1 rank per node", "several ranks per node"}
    assert a["per_config"][Config().key()] == pytest.approx(1.0)


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True)


def test_the_prediction_must_be_committed_unchanged_before_the_comparison(tmp_path, capsys):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    pred = repo / "zen4-to-zen5.json"
    argv = ["predict", "--fit", ZEN4, "--target", ZEN5, "--out", str(pred), "--rounds", "1"]
    assert two_machines.main(argv) == 0
    assert "commit it before comparing" in capsys.readouterr().out
    compare = ["compare", str(pred), "--target", ZEN5]
    assert two_machines.main(compare) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "it is not committed; commit the prediction" in err
    git(repo, "add", pred.name)
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "prediction")
    assert two_machines.main(compare + ["--out", str(tmp_path / "result.json")]) == 0
    table = capsys.readouterr().out
    assert "| layout: 1 rank per node |" in table and "| batch: 128 |" in table
    assert "best within the accuracy gate: predicted" in table
    assert "layout class that wins: predicted" in table
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["fit"] == "d0a564b09095" and result["target"] == "115e441fefef"
    assert {r["class"] for r in result["classes"]} >= {"precision: bf16", "batch: 32"}
    assert result["best"]["measured"]["x"] > 1.0 and isinstance(result["best"]["within_target"], bool)
    pred.write_text(pred.read_text().replace('"max_accuracy_drop": 1.0', '"max_accuracy_drop": 9.0'))
    assert two_machines.main(compare) == 2
    assert "differs from its committed version" in capsys.readouterr().err


def test_a_landscape_of_another_machine_than_told_is_refused_in_one_line(tmp_path, capsys):
    out = tmp_path / "pred.json"
    argv = ["predict", "--fit", f"7cdbdc5b4fd3={ZEN5}", "--target", ZEN4, "--out", str(out)]
    assert two_machines.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "from machine 115e441fefef" in err and "not 7cdbdc5b4fd3" in err
    assert not out.exists()
    # a file not named after its machine must say which one it is
    unnamed = copy_as(tmp_path, ZEN5, "zen5.json", lambda d: None)
    with pytest.raises(LandscapeRefused, match="say which machine it is from"):
        load_checked(unnamed)


def test_a_capture_of_another_machine_inside_the_file_is_refused(tmp_path):
    root = MACHINES / "h200-emr-16c"
    capture = {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()}
    mixed = copy_as(tmp_path, ZEN5, "landscape-115e441fefef.json",
                    lambda d: d.update(capture=capture))
    with pytest.raises(LandscapeRefused) as exc:
        load_checked(mixed)
    assert "(its capture's fingerprint), not 115e441fefef as told" in str(exc.value)


def test_missing_classes_are_named(tmp_path, capsys):
    def one_rank_only(d):
        d["rows"] = {k: r for k, r in d["rows"].items() if r["config"]["nproc"] == 1}
        del d["accuracy"]["64:fp32"]
    thin = copy_as(tmp_path, ZEN5, "landscape-115e441fefef.json", one_rank_only)
    assert recorded.main([thin, "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing layout 'several ranks per node' (no ok row)" in err
    assert "the accuracy of math class 64:fp32" in err and not (tmp_path / "r.json").exists()


def test_the_search_replayed_on_a_whole_recorded_landscape(tmp_path):
    res = recorded.replay(ZEN5, seeds=1, fill="auto", say=lambda *a: None)
    assert res["fill"] == "none" and res["coverage"] == 1.0 and res["launchable"] == 324
    t = res["trials_95"]
    assert 1 <= t["autotune"] <= res["launchable"] and t["grid"] == 148
    assert res["target"]["trials"] == 10 and res["target"]["met"] == (t["autotune"] <= 10)


def test_a_few_recorded_configurations_are_completed_by_the_model_fitted_on_them(tmp_path):
    def thin(d):
        rng = random.Random(3)
        ok = sorted(k for k, r in d["rows"].items() if r["outcome"] == "ok"
                    and not r["role"].startswith("reference"))
        keep = set(rng.sample(ok, 24))
        d["rows"] = {k: r for k, r in d["rows"].items() if k in keep
                     or r["role"].startswith("reference")}
    few = copy_as(tmp_path, ZEN5, "landscape-115e441fefef.json", thin)
    land, _ = load_checked(few)
    said = []
    res = recorded.replay(few, seeds=1, fill="auto", rounds=1, say=said.append)
    assert res["fill"] == "model" and res["coverage"] < 0.5 and "answers" in said[0]
    measured_best = max(r["throughput"] for r in land.rows.values()
                        if r["outcome"] == "ok" and land.feasible_within(Config.from_dict(r["config"]), 1.0))
    assert res["oracle"]["throughput"] == measured_best      # the target stays the measured best
    assert res["trials_95"]["autotune"] >= 1
    table = recorded.filled(land, two_machines.KNOWN_HARDWARE["115e441fefef"],
                                   two_machines.fit(land, two_machines.KNOWN_HARDWARE["115e441fefef"], 1))
    assert isinstance(table, Landscape) and table.missing() == 0
    assert sum(1 for r in table.rows.values() if not r.get("modelled")) == len(land.rows)
