"""One typed trial result through a real SQLite study: what record_trial stores, records() reads
back equal; a study written by an older autotune (user attributes under the same keys, with keys
this version does not know) loads into typed results."""
from __future__ import annotations

import dataclasses

import optuna
import pytest
from optuna.trial import TrialState

from autotune.config import Config
from autotune.result import Outcome, TrialResult
from autotune.study.records import (LOG_TAIL_LIMIT, REASON_LIMIT, Record, Role, record_of,
                                    record_trial, records)
from autotune.study.storage import open_storage, open_study

# Every key a stored trial has carried (the dashboard shows them; old studies have them).
STORED_KEYS = {
    "schema_version", "autotune_version", "config", "config_key", "outcome", "reason", "role",
    "accuracy", "seconds", "wall_seconds", "mode", "cpu_share", "log_tail", "step_median_s",
    "step_iqr_s", "throughput_iqr", "startup_s", "timed_share", "timed_steps", "peak_rss_mb",
    "seed", "curve", "gns", "metric_source", "metric_note", "metric_shown", "observed", "unacted",
    "overridden", "math_class", "quality", "quality_sd", "quality_n", "quality_verdict",
    "reused_from", "note", "own_share", "outside_share", "median_throughput", "window_s",
    "samples", "stopped_early", "split", "ceiling", "ceiling_split", "fixed", "of_ceiling",
    "ignored_files", "compile_s", "compile_cache", "recompiles"}

# No field at its default: a field added to TrialResult must be given a value here.
FULL = TrialResult(
    outcome=Outcome.OK, reason="", throughput=123.5, accuracy=0.791, seconds=12.3456,
    mode="throughput", cpu_share=0.93, own_share=0.46, outside_share=0.38, log_tail="last lines", step_median_s=0.031,
    step_iqr_s=0.002, throughput_iqr=4.5, median_throughput=121.0, window_s=5.2, samples=640,
    startup_s=2.1, timed_share=0.6, timed_steps=120,
    stopped_early="stopped early after 2 windows: at most 80.0/s, below 95% of the leader's 120.0/s",
    peak_rss_mb=(512, None), seed=1, curve=((1024, 0.5), (2048, 0.75)),
    gns={"small": [1.0, 2.0], "big": [0.5]}, metric_source="pattern", metric_shown="0.52 s/step",
    observed=({"rank": 0, "busy_threads": 2, "num_threads": 9, "affinity": "0-1",
               "libraries": ["libgomp.so.1"], "mempolicy": None, "processes": 1},),
    unacted=("threads=1 planned; rank 0 ran 2 busy threads",),
    overridden={"threads": "threads=1 planned; rank 0 ran 2 busy threads"},
    math_class="gb32-fp32", quality="accepted", quality_sd=0.002, quality_n=3,
    quality_verdict="within 1 pp", reused_from=4, of_ceiling=0.81,
    split={"step_s": 0.04, "source": "worker", "data": 0.02, "compute": 0.018},
    ceiling=151.2, ceiling_split={"step_s": 0.021, "source": "worker", "compute": 0.02},
    fixed={"start": 0.1, "imports": 1.4, "group": 0.1, "model": 0.3, "warmup": 0.5},
    note="rank 1 idle for 30 s after rank 0 exited; ended (it sat in futex_do_wait)",
    ignored_files=1, compile_s=14.2, compile_cache="cold", recompiles=1)


def _study(tmp_path) -> optuna.Study:
    return open_study(open_storage(f"sqlite:///{tmp_path}/s.db"), "records")


def test_the_example_result_sets_every_field():
    defaults = TrialResult(outcome=Outcome.OK)
    unset = [f.name for f in dataclasses.fields(TrialResult) if f.name not in ("outcome", "reason")
             and getattr(FULL, f.name) == getattr(defaults, f.name)]
    assert unset == []


def test_a_stored_result_reads_back_equal(tmp_path):
    study = _study(tmp_path)
    config = Config(nproc=2, threads=1)
    stored = record_trial(study, config=config, result=FULL, role=Role.DEFAULT)
    again = records(_study(tmp_path))   # a fresh handle: what is on disk, not in memory
    assert again == [stored]
    assert stored == Record(config=config, result=FULL, role=Role.DEFAULT, number=0, feasible=True)
    assert set(study.trials[0].user_attrs) == STORED_KEYS
    u = study.trials[0].user_attrs
    assert u["curve"] == [[1024, 0.5], [2048, 0.75]] and u["wall_seconds"] == 12.35
    assert u["metric_note"] and study.trials[0].values == [123.5, 0.791]


def test_failures_repeats_and_interruptions(tmp_path):
    study = _study(tmp_path)
    crash = TrialResult(outcome=Outcome.CRASH, reason="x" * (REASON_LIMIT + 5), seconds=3.0,
                        mode="throughput", log_tail="y" * (LOG_TAIL_LIMIT + 5))
    a = record_trial(study, config=Config(threads=1), result=crash)
    b = record_trial(study, config=Config(threads=2), role=Role.REPEAT, violation=1.0,
                     result=TrialResult(outcome=Outcome.OK, throughput=9.0, reused_from=a.number))
    record_trial(study, config=Config(threads=3), result=TrialResult(
        outcome=Outcome.INTERRUPTED, reason="the search was interrupted during this trial"))
    assert records(_study(tmp_path)) == [a, b]   # interrupted trials are not evaluations
    assert len(a.reason) == REASON_LIMIT and len(a.result.log_tail) == LOG_TAIL_LIMIT
    assert not a.feasible and not b.feasible and b.throughput == 9.0
    assert set(study.trials[0].user_attrs) == {
        "schema_version", "autotune_version", "config", "config_key", "outcome", "reason",
        "role", "accuracy", "seconds", "wall_seconds", "mode", "log_tail"}
    stopped = record_of(study.trials[2])
    assert study.trials[2].state == TrialState.FAIL and stopped.outcome == Outcome.INTERRUPTED


# What autotune wrote before the typed result: a built-in trial, a script trial, a failed one
# (cpu_share None was written then), a repeat, and one that a killed search left (no outcome).
def _old(config: Config, **attrs) -> dict:
    return {"schema_version": 2, "autotune_version": "0.9.0", "config": config.to_dict(),
            "config_key": config.key(), "reason": "", "role": Role.SEARCH, "accuracy": None,
            "autotune:claim": {"key": config.key(), "token": "abc"}, "a_future_key": [1, 2],
            **attrs}


OLD = [
    (Config(), [100.0, 0.79], 0.0, _old(
        Config(), outcome="ok", role=Role.DEFAULT, accuracy=0.79, wall_seconds=12.35,
        mode="throughput", cpu_share=0.93, step_median_s=0.031, step_iqr_s=0.002,
        throughput_iqr=4.5, startup_s=2.1, timed_share=0.6, timed_steps=120,
        peak_rss_mb=[512, None], math_class="gb32", quality="accepted", quality_sd=0.002,
        quality_n=3, quality_verdict="within 1 pp", seconds=12.3456)),
    (Config(threads=1), [0.5, 0.0], 0.0, _old(
        Config(threads=1), outcome="ok", wall_seconds=3.0, mode="throughput", cpu_share=None,
        metric_source="pattern", metric_note="the median of --metric", metric_shown="2 s/step",
        observed=[{"rank": 0, "busy_threads": 2}], unacted=["threads did not act"],
        overridden={"threads": "threads did not act"}, seconds=3.0)),
    (Config(threads=2), [0.0, 0.0], 1.0, _old(
        Config(threads=2), outcome="crash", reason="rank 1 exited with signal 11",
        wall_seconds=1.0, mode="throughput", cpu_share=None, log_tail="Segmentation fault",
        seconds=1.0)),
    (Config(), [100.0, 0.79], 0.0, _old(
        Config(), outcome="ok", role=Role.REPEAT, accuracy=0.79, reused_from=0)),
]


def test_a_study_written_the_old_way_loads_typed(tmp_path):
    study = _study(tmp_path)
    for _, values, constraint, attrs in OLD:
        study.add_trial(optuna.trial.create_trial(
            state=TrialState.COMPLETE, values=values, user_attrs=attrs,
            system_attrs={"constraints": [constraint], "constraints:feasible": constraint}))
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.FAIL, user_attrs={"config": Config(nproc=2).to_dict()}))
    got = records(_study(tmp_path))
    assert [r.config for r in got] == [c for c, *_ in OLD]
    assert [(r.role, r.feasible) for r in got] == [
        (Role.DEFAULT, True), (Role.SEARCH, True), (Role.SEARCH, False), (Role.REPEAT, True)]
    assert got[0].result == TrialResult(
        outcome=Outcome.OK, throughput=100.0, accuracy=0.79, seconds=12.3456, mode="throughput",
        cpu_share=0.93, step_median_s=0.031, step_iqr_s=0.002, throughput_iqr=4.5,
        startup_s=2.1, timed_share=0.6, timed_steps=120, peak_rss_mb=(512, None),
        math_class="gb32", quality="accepted", quality_sd=0.002, quality_n=3,
        quality_verdict="within 1 pp")
    assert got[1].result == TrialResult(
        outcome=Outcome.OK, throughput=0.5, seconds=3.0, mode="throughput", metric_source="pattern",
        metric_shown="2 s/step", observed=({"rank": 0, "busy_threads": 2},),
        unacted=("threads did not act",), overridden={"threads": "threads did not act"})
    assert got[2].result == TrialResult(
        outcome=Outcome.CRASH, reason="rank 1 exited with signal 11", seconds=1.0, mode="throughput",
        log_tail="Segmentation fault")
    assert got[3].result == TrialResult(outcome=Outcome.OK, throughput=100.0, accuracy=0.79,
                                        reused_from=0)
    killed = record_of(study.trials[-1])
    assert killed.outcome == Outcome.INTERRUPTED and killed.throughput is None


@pytest.mark.parametrize("result", [FULL, TrialResult(outcome=Outcome.TIMEOUT, reason="no step")])
def test_reading_back_what_was_read_changes_nothing(tmp_path, result):
    """Store a record read back from one study into another: the same record again."""
    first = record_trial(_study(tmp_path), config=Config(), result=result)
    other = open_study(open_storage(f"sqlite:///{tmp_path}/t.db"), "copy")
    record_trial(other, config=first.config, result=first.result, role=first.role)
    assert records(other) == [first]
