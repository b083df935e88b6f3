"""The accuracy gate's benchmark on literal runs: per-example outcomes packed and read back, the
paired gate and McNemar judged over seed subsets at two held-out sizes, and the replay of the
recorded searches' verdicts. No processes: the measured runs are docs/benchmarks.md's."""
from __future__ import annotations

import json

import pytest

from benchmarks.accuracy import gate as AG
from benchmarks.accuracy import gate_replay
from benchmarks.workloads.gate_probe import _pack, unpack


def _bits(n_right: int, total: int = 16384, offset: int = 0) -> str:
    """`n_right` examples right, starting at example `offset` (wrapping), the rest wrong."""
    import torch
    hits = torch.zeros(total, dtype=torch.bool)
    for i in range(n_right):
        hits[(offset + i) % total] = True
    return _pack(hits)


def test_outcomes_round_trip_example_by_example():
    import torch
    hits = torch.tensor([True, False, True, True, False, False, False, True, True])
    assert unpack(_pack(hits)) == hits.tolist()


def _row(arm: str, seed: int, right: int, noise: float = 0.0) -> dict:
    return {"workload": "cnn", "arm": arm, "seed": seed, "samples": 8192, "label_noise": noise,
            "eval_samples": 16384, "outcome": "ok", "quality": right / 16384,
            "held_out": _bits(right)}


def test_a_class_that_loses_nothing_is_within_and_one_that_loses_3_pp_never_is(tmp_path):
    rows = []
    for seed in range(8):
        base = 14000 + 40 * seed                       # seeds spread; pairs move together
        rows += [_row("default", seed, base), _row("bf16", seed, base - 8 + 4 * (seed % 3)),
                 _row("noisy", seed, base - 490 - 10 * (seed % 2), 0.05)]
    # the what-ifs' normal model at 200 draws, not the table's 20000: nothing here reads its
    # rates, and at 20000 it was nearly all of this test's time
    t = AG.tables(rows, draws=200)["cnn@8192"]["arms"]
    bf16, noisy = t["bf16"], t["noisy0.05"]
    assert bf16["K"] == 8 and abs(bf16["true_drop_pp"]) < 0.1
    assert noisy["true_drop_pp"] == pytest.approx(100 * 495 / 16384, abs=0.01)
    for n_eval in ("2048", "16384"):
        # the outcomes shift by whole examples from the first one: on the first 2048 held-out
        # examples every run gets them all right, so nothing separates the arms there
        assert bf16["by_eval"][n_eval]["n3"]["subsets"] == 56
    full = bf16["by_eval"]["16384"]
    assert full["n3"]["within"] == 1.0 and full["n6"]["within"] == 1.0
    assert noisy["by_eval"]["16384"]["n3"]["within"] == 0.0
    assert noisy["by_eval"]["16384"]["n6"]["beyond"] == 1.0
    for what_if in bf16["what_if"].values():
        assert all(sum(rates.values()) == pytest.approx(1.0, abs=1e-3) for rates in what_if.values())


def test_mcnemar_bounds_the_drop_from_the_discordant_examples():
    d = [[True] * 90 + [False] * 10]
    c = [[True] * 85 + [False] * 15]
    # b = 5 examples lost, c = 0 gained, N = 100: drop 5 pp, var (5 - 0.25) / 10^4
    assert AG.mcnemar_upper(d, c) == pytest.approx(5 + 1.645 * 100 * (4.75 ** 0.5) / 100)


def test_the_replay_names_what_the_recorded_figures_decide():
    text = ("  accuracy 0.924 ± 0.007 (default 0.944 ± 0.006, 3 new seeds x 16384 samples, side "
            "by side): within 1 pp (drop +2.02 pp, noise 1.26 pp)\n"
            "  accuracy 0.941 ± 0.001 (default 0.942 ± 0.001, 3 new seeds x 16384 samples, side "
            "by side): within 1 pp (drop +0.11 pp, noise 0.17 pp)\n"
            "  accuracy 0.940 ± 0.011 (default 0.941 ± 0.003, 3 new seeds x 16384 samples, side "
            "by side): within 1 pp (drop +0.08 pp, noise 1.90 pp)\n")
    out = gate_replay.replay(text + text)                # a line repeated counts once
    assert [r["new"] for r in out] == ["not within", "within", "undetermined"]
    assert out[0]["why"].startswith("mean drop 2.02 pp is past 1 pp")


def test_the_benchmark_refuses_bad_arguments_in_one_line(capsys):
    assert AG.main(["--seeds", "2"]) == 2
    assert AG.main(["--lengths", "8k"]) == 2
    assert AG.main(["--draws", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "--lengths '8k'" in err[1] and "--draws" in err[2]


def test_the_table_is_written_from_stored_runs(tmp_path, capsys):
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(json.dumps(_row(a, s, 14000 - (30 if a == "bf16" else 0) + 50 * s))
                            + "\n" for s in range(4) for a in ("default", "bf16")))
    out = tmp_path / "t.json"
    assert AG.main(["--runs", str(runs), "--out", str(out), "--draws", "200"]) == 0
    data = json.loads(out.read_text())
    assert data["tables"]["cnn@8192"]["arms"]["bf16"]["K"] == 4
    assert "within" in capsys.readouterr().out
