"""Feeding a CPU's step, for real (issue 51): which workloads the CPU space offers DataLoader
workers to, the one line that rules them out for a workload whose samples a worker process
cannot make (the check starts a real worker), and a whole short search on a data-bound entry
point whose first guided trial feeds the step in the default's math."""
from __future__ import annotations

import multiprocessing
import subprocess
import sys
import tempfile

import pytest

from autotune.commands.search_job import prepare
from autotune.config import Config
from autotune.measure.split import Bottleneck, split_from
from autotune.quality.math_class import math_class
from autotune.study.records import Role
from autotune.tune import SearchRequest, search
from autotune.worker.data import worker_problem
from paths import REPO, TESTS
from two_core import topo  # noqa: F401 - fixture: the captured 2-core EPYC


@pytest.fixture
def on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.setenv("PYTHONPATH", f"{TESTS}:{REPO}")


def _job(topo, workload: str | None, tmp_path):
    return prepare(SearchRequest(budget_s=60.0, workload=workload, results=str(tmp_path)),
                   label=workload or "cnn", topology=topo, cluster=None)


def test_workers_are_offered_where_the_workload_has_a_pipeline(on_path, topo, tmp_path):
    plain = _job(topo, None, tmp_path)     # the built-in cnn: its batches are made in the rank
    assert "dataloader_workers" not in plain.space.knobs and plain.notes == ()
    fed = _job(topo, "data_bound_workload:build", tmp_path)
    assert fed.space.knobs["dataloader_workers"] == (0, 1, 2) and fed.notes == ()


def test_a_workload_whose_samples_a_worker_cannot_make_loses_the_knob_in_one_line(on_path, topo,
                                                                                 tmp_path):
    job = _job(topo, "unfed_workloads:parent_only", tmp_path)
    assert "dataloader_workers" not in job.space.knobs
    assert job.notes == (
        "dataloader_workers ruled out for workload unfed_workloads:parent_only: its samples "
        "cannot be made in a DataLoader worker process (RuntimeError: this dataset's handle "
        "belongs to the process that opened it); the search goes on without it",)


def test_a_lambda_dataset_is_refused_by_a_start_method_that_pickles(on_path):
    # spawned workers, in a Python of its own: the resource tracker spawning starts ends with it
    check = ("from autotune.worker.data import worker_problem; import unfed_workloads; "
             "print(worker_problem(unfed_workloads.lambda_samples(), context='spawn'))")
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                         timeout=120, check=True).stdout.strip()
    assert "Can't pickle" in out and "lambda" in out and "\n" not in out
    if multiprocessing.get_start_method() == "fork":   # what the trials' workers use here
        from unfed_workloads import lambda_samples
        assert worker_problem(lambda_samples()) is None   # forked, it runs as it is


def test_a_quality_run_with_workers_trains_exactly_as_without(tmp_path):
    """The same math, shown: a seeded quality run whose batches two DataLoader workers make ends
    at the very accuracy of the same run whose rank makes them itself."""
    from autotune.probe import probe
    from autotune.run.evaluate import live_evaluator
    from autotune.run.trial import TrialSettings
    settings = TrialSettings(workload="cnn", workload_args={"decode_ms": 0.05},
                             accuracy_samples=1024, timeout_s=300.0,
                             results_dir=str(tmp_path / "r"))
    evaluate = live_evaluator(probe(None), settings)
    try:
        runs = [evaluate(Config(threads=1, dataloader_workers=w), "accuracy", seed=0)
                for w in (0, 2)]
    finally:
        evaluate.close()
    assert all(r.ok for r in runs), [r.reason for r in runs]
    assert runs[0].accuracy == runs[1].accuracy


@pytest.mark.scenario
def test_a_search_on_a_data_bound_entry_point_feeds_the_step_first(on_path, tmp_path,
                                                                   monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))   # the machine lock, kept private
    req = SearchRequest(budget_s=150.0, workload="data_bound_workload:build", seconds=1.0,
                        results=str(tmp_path / "results"), verify_rounds=1, quality_seeds=2,
                        quality_samples=1024, max_trials=4)
    tuned = search(req)
    # the references (the default launch, run_cpu's, the default compiled where compiling is
    # offered), then the guide's first trial
    ran = sorted(tuned.result.records, key=lambda r: r.number)
    default = ran[0]
    guided = next(r for r in ran if r.role == Role.SEARCH)
    assert default.config == Config()
    if split_from(default.result.split).bottleneck != Bottleneck.DATA:
        # other processes stretched the default's compute past its data (a shared machine):
        # the guide then follows the compute, with no workers in its first guess
        assert guided.config.dataloader_workers == 0
        return
    # the first guided trial: the most workers, one thread beside them, the default's math
    assert (guided.config.dataloader_workers, guided.config.threads) == (2, 1)
    assert math_class(guided.config, batchnorm=True) == math_class(Config(), batchnorm=True)
    lines = tuned.summary["where_the_time_goes"]
    rec = tuned.recommendation
    if rec is not None and rec.config.dataloader_workers:   # which one wins is the machine's
        assert lines[-1].startswith("the default launch waited on data ")
        assert "DataLoader worker" in lines[-1]
