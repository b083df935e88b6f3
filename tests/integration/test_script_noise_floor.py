"""Script mode's accuracy noise floor over seeds, through real searches: a script that reads
$AUTOTUNE_SEED is run on the default launch with each --quality-seeds seed before any gate, the
spread is stored and `report` states it; a script that takes no seed gets the note that the gate
compares single measurements."""
from __future__ import annotations

import sys
import textwrap

import optuna
import pytest

from autotune.cli import main
from autotune.study.attrs import SCRIPT_NOISE_FLOOR
from autotune.tune import NO_SEED_NOTE

SPACE = "name: script-seeds\nknobs:\n  threads:\n    choices: [1, 2]\n"
# A fixed amount of work, timed; its "accuracy" moves with the seed by a point per seed.
SEEDED = """
    import os, time
    seed = int(os.environ["AUTOTUNE_SEED"])
    start = time.perf_counter()
    sum(range(3_000_000))
    print(f"throughput: {1.0 / (time.perf_counter() - start):.3f}", flush=True)
    print(f"accuracy: {0.80 + 0.01 * seed:.4f}", flush=True)
"""
UNSEEDED = SEEDED.replace('int(os.environ["AUTOTUNE_SEED"])', "0")


def _search(tmp_path, capsys, body: str):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(body))
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    rc = main(["search", "--budget", "4m", "--space", str(space), "--results", str(tmp_path),
               "--max-trials", "3", "--verify-rounds", "1", "--max-verify-rounds", "1", "--quality-seeds", "3",
               "--allow-concurrent", "--metric", r"throughput: ([0-9.]+)",
               "--accuracy", r"accuracy: ([0-9.]+)", "--", sys.executable, str(script)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    storage = f"sqlite:///{tmp_path}/autotune.db"
    (name,) = [s.study_name for s in optuna.get_all_study_summaries(storage)]
    assert main(["report", "--results", str(tmp_path)]) == 0
    report = capsys.readouterr().out
    return optuna.load_study(study_name=name, storage=storage), err, report


def test_a_seeded_scripts_noise_floor_is_measured_before_any_gate_and_reported(tmp_path, capsys):
    study, err, report = _search(tmp_path, capsys, SEEDED)
    floor = study.user_attrs[SCRIPT_NOISE_FLOOR]
    assert floor["seeds"] == [0, 1, 2]
    assert floor["values"] == pytest.approx([0.80, 0.81, 0.82])
    # measured right after the default launch, before any other configuration ran
    assert err.index("accuracy noise floor: default launch, seed 2") < err.index("trial 1 (")
    assert ("accuracy noise floor: the default launch measured 0.810 ± 0.010 over seeds 0, 1, 2"
            in report), report


def test_a_script_without_a_seed_is_told_the_gate_uses_single_measurements(tmp_path, capsys):
    study, err, report = _search(tmp_path, capsys, UNSEEDED)
    assert study.user_attrs[SCRIPT_NOISE_FLOOR] == {"note": NO_SEED_NOTE}
    assert NO_SEED_NOTE in err and NO_SEED_NOTE in report
    assert "accuracy noise floor: default launch, seed" not in err
