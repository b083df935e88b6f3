"""The whole-procedure simulation (benchmarks/accuracy/procedure.py) on a few hundred studies:
autotune's own judge decides, so the arms' invariants hold on any draw: a class with a failed or
spiked seed is never accepted, a class losing 2 pp almost never is, and nothing is accepted more
often than its spike-free floor allows. No processes."""
from __future__ import annotations

import json

from benchmarks.accuracy import procedure as P


def test_a_failed_or_spiked_seed_is_never_accepted():
    failed = P.measure(P.Arm("failed", "10m", 0.0, verify=True, fail_share=0.3), 300)
    assert failed["accepted_with_a_failed_seed"] == 0
    spiky = P.measure(P.Arm("spiky", "10m", 0.0, verify=True, spike_share=0.2), 300)
    assert spiky["accepted_with_a_spike"] == 0
    assert spiky["accepted"] <= spiky["floor_no_spike_ran"]


def test_a_class_losing_2_pp_is_not_accepted_and_one_losing_nothing_is():
    assert P.measure(P.Arm("2pp", "10m", 2.0, 3, verify=True), 300)["accepted"] <= 0.01
    assert P.measure(P.Arm("none", "10m", 0.0), 300)["accepted"] >= 0.8


def test_the_table_is_written_and_bad_arguments_refused(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert P.main(["--studies", "20", "--out", str(out)]) == 0
    assert len(json.loads(out.read_text())["arms"]) == len(P.ARMS)
    assert P.main(["--studies", "0"]) == 2
    assert capsys.readouterr().err.strip() == "accuracy_procedure: --studies must be at least 1"
