"""Script mode end to end with real processes (marked slow): a DDP script that sets its own
threads at import, an mp.spawn script, and a lower-is-better metric tuned through a real search.

The scripts are benchmarks/workloads/sets_own_threads.py and spawns_own_workers.py, with few steps
so that each trial is mostly interpreter start-up.
"""
from __future__ import annotations

from paths import REPO
import json
import re
import sys
from pathlib import Path

import optuna
import pytest

from autotune.cli import main
from autotune.study.attrs import SCRIPT_OVERRIDES

OWN_THREADS = str(REPO / "benchmarks" / "workloads" / "sets_own_threads.py")
SPAWNS = str(REPO / "benchmarks" / "workloads" / "spawns_own_workers.py")
# threads x nproc on at most the 2 cores CI has; threads=2 with nproc=2 is ruled out unrun.
SPACE = """\
name: script-threads
knobs:
  threads:
    choices: [1, 2]
  nproc:
    choices: [1, 2]
constraints:
  - threads * nproc <= usable_cores
"""

pytestmark = pytest.mark.slow


def _trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)


@pytest.mark.scenario
def test_script_that_sets_its_own_threads_is_tuned_with_its_time_and_accuracy(tmp_path, capsys):
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    rc = main(["search", "--budget", "15m", "--space", str(space), "--results", str(tmp_path),
               "--max-trials", "5", "--verify-rounds", "1", "--max-verify-rounds", "1", "--allow-concurrent",
               "--metric", r"Training time: ([0-9.]+)", "--lower-is-better",
               "--accuracy", r"Test accuracy: ([0-9.]+)", "--max-accuracy-drop", "99",
               # a few seconds of training, so that the script's own thread pool is sampled busy
               # in several windows (30 steps were over in a fraction of one on a quiet machine)
               "--", sys.executable, OWN_THREADS, "--steps", "300", "--hidden", "512"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    storage = f"sqlite:///{tmp_path}/autotune.db"
    (name,) = [s.study_name for s in optuna.get_all_study_summaries(storage)]
    # 1. Before the first trial: one warning naming the lines, stored in the study.
    first_trial = err.index("trial 0 (reference:default)")
    assert err.index(f"{OWN_THREADS}:12 sets OMP_NUM_THREADS") < first_trial
    assert err.index(f"{OWN_THREADS}:13 sets KMP_AFFINITY") < first_trial
    study = optuna.load_study(study_name=name, storage=storage)
    assert f"{OWN_THREADS}:12 sets OMP_NUM_THREADS" in study.user_attrs["script_warning"]
    # 2. After a trial that planned a thread count: the processes showed the script's own.
    trials = _trials(study)
    caught = [t for t in trials if any("the script sets its own thread count" in m
                                       for m in t.user_attrs.get("unacted", []))]
    assert caught, [t.user_attrs.get("observed") for t in trials]
    first = caught[0]
    assert first.user_attrs["config"]["threads"] == 1
    assert any(o["busy_threads"] > 1 for o in first.user_attrs["observed"])
    # whichever rank was sampled busier (the order of trials depends on the sampler's draws)
    assert re.search(r"did not act: threads=1 planned; rank \d+ ran", err), err
    assert "not varying threads any more" in err
    assert set(study.user_attrs[SCRIPT_OVERRIDES]) >= {"threads", "kmp_affinity"}
    # 3. threads is not varied afterwards: every later trial leaves it to the script.
    later = [t for t in trials if t.number > first.number
             and t.user_attrs.get("role") == "search"]
    assert all("threads" not in t.params for t in later)
    # 4. The script's own numbers: lower-is-better time as the score, its accuracy stored.
    ok = [t for t in trials if t.user_attrs.get("outcome") == "ok" and t.values]
    for t in ok:
        shown = t.user_attrs["metric_shown"]
        assert "lower is better" in shown and "samples/s" not in shown
        assert t.values[0] == pytest.approx(1 / float(shown.split()[0]), rel=1e-3)
        assert 0.0 <= t.user_attrs["accuracy"] <= 1.0
    assert " s per run" not in err and "samples/s" not in err.split("trial 0")[1]
    # 5. The export claims no thread count that did not act.
    for fmt in ("shell", "torchrun"):
        rc = main(["export", "--results", str(tmp_path), "--format", fmt])
        text = capsys.readouterr().out
        assert rc == 0
        code = [ln for ln in text.splitlines() if not ln.startswith("#")]
        assert not any("OMP_NUM_THREADS" in ln or "KMP_AFFINITY" in ln for ln in code), text
        assert "# threads: not set here, the script sets its own" in text
    assert "threads: not claimed, the script sets its own" in out     # the search's own summary


def test_mp_spawn_script_is_launched_once_and_its_workers_get_the_tuned_threads(tmp_path, capsys):
    cmd = ["--", sys.executable, SPAWNS, "--steps", "4"]
    rc = main(["run", "--set", "nproc=2", "--set", "threads=1", "--results", str(tmp_path),
               "--json", *cmd])
    out, err = capsys.readouterr()
    line = next(i for i, text in enumerate(Path(SPAWNS).read_text().splitlines(), 1)
                if "mp.spawn(" in text)
    assert rc == 1 and f"{SPAWNS}:{line} starts its own workers" in err
    result = json.loads(out)
    assert result["outcome"] == "infeasible" and "launches it once" in result["reason"]
    rc = main(["run", "--set", "threads=1", "--results", str(tmp_path), "--json",
               "--metric", r"Training time: ([0-9.]+)", "--lower-is-better", *cmd])
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert rc == 0, err
    # One launched process; its two spawned workers inherited OMP_NUM_THREADS=1 and kept it.
    assert result["unacted"] == [], result
    assert "lower is better" in result["metric_shown"]
    observed = result["observed"]
    assert len(observed) == 1 and observed[0]["processes"] >= 3      # the parent + 2 workers
    assert observed[0]["busy_threads"] == 1


def test_wall_time_fallback_prints_seconds_per_run(tmp_path, capsys):
    rc = main(["run", "--results", str(tmp_path), "--", sys.executable, "-c", "print('hi')"])
    out, _ = capsys.readouterr()
    assert rc == 0 and " s per run (wall time)" in out and "samples/s" not in out
