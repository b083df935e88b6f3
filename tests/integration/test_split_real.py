"""Where each step's time goes and the ceiling, measured for real on this machine's CPUs: the
built-in workload, two gloo ranks (the all-reduce told apart), a user's entry point whose step
waits on data (the diagnosis says data, and the guide then moves the data pipeline first), and a
script that reports its own split."""
from __future__ import annotations

import dataclasses
import os
import sys

import pytest

from autotune.config import Config
from autotune.measure.split import Bottleneck, split_from
from autotune.plan.feasible import ruled_out
from autotune.probe import probe
from autotune.result import Outcome
from autotune.run.evaluate import live_evaluator
from autotune.run.trial import TrialSettings
from autotune.search.guide import Guide
from autotune.space.resolve import parse_space, resolve
from autotune.study.records import Record, Role
from paths import REPO, TESTS


@pytest.fixture(scope="module")
def topology():
    return probe(None)


def _evaluate(topology, tmp_path, **settings):
    return live_evaluator(topology, TrialSettings(target_seconds=1.0, timeout_s=120.0,
                                                  results_dir=str(tmp_path / "r"), **settings))


def test_the_builtin_step_is_split_and_its_ceiling_timed(topology, tmp_path):
    evaluate = _evaluate(topology, tmp_path)
    try:
        out = evaluate(Config(threads=2), "throughput", ceiling_above=0.0)
    finally:
        evaluate.close()
    assert out.ok, out.reason
    split = split_from(out.split)
    assert split is not None and split.source == "worker"
    assert set(split.seconds) == {"data", "copy", "compute", "optimizer"}   # one rank: no wait
    assert 0.9 * split.step_s <= sum(split.seconds.values()) <= split.step_s * 1.001
    assert split.bottleneck == Bottleneck.COMPUTE      # in-process batches of a small cnn
    ceiling = split_from(out.ceiling_split)
    assert out.ceiling and ceiling is not None
    # resident batches: nothing to make or copy in the ceiling's steps
    assert ceiling.seconds["data"] < 0.01 * ceiling.step_s
    assert set(out.fixed) == {"start", "imports", "group", "model", "warmup"}


def test_two_ranks_tell_the_allreduce_apart(topology, tmp_path):
    evaluate = _evaluate(topology, tmp_path)
    try:
        out = evaluate(Config(nproc=2, threads=1), "throughput")
    finally:
        evaluate.close()
    assert out.ok, out.reason
    split = split_from(out.split)
    assert "allreduce" in split.seconds and split.seconds["allreduce"] > 0


def test_a_data_bound_entry_point_is_diagnosed_and_the_guide_feeds_it_first(topology, tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv("PYTHONPATH", f"{TESTS}{os.pathsep}{REPO}")
    evaluate = _evaluate(topology, tmp_path, workload="data_bound_workload:build")
    try:   # one thread: OpenMP's barriers do not stretch the compute on a loaded machine
        out = evaluate(Config(threads=1), "throughput")
    finally:
        evaluate.close()
    assert out.ok, out.reason
    split = split_from(out.split)
    assert split.bottleneck == Bottleneck.DATA and split.share("data") > 0.5
    # the guide reads that split: its first guess gives the step a DataLoader worker
    space = resolve(parse_space(
        "name: t\nknobs:\n  threads: [1, 2]\n  precision: [fp32]\n"
        "  dataloader_workers: [0, 1]\nconstraints:\n"
        "  - (threads + dataloader_workers) * nproc <= usable_cores\n", source="t.yaml"),
        topology, pipeline=True)   # an entry point: a pipeline of its own
    guide = Guide("descent", topology, lambda c: c.key(), ruled_out)
    default = Config(threads=1)
    known = {default.key(): Record(config=default, role=Role.DEFAULT, feasible=True,
                                   result=dataclasses.replace(out))}
    guess = guide.next(space, known)
    assert guess["dataloader_workers"] == 1 and guess["threads"] == 1


SCRIPT = """
import autotune, time
time.sleep(0.2)
autotune.report_metrics(samples_per_sec=100.0,
                        split={"data": 0.03, "compute": 0.06, "optimizer": 0.01})
print("done")
"""


def test_a_script_reports_its_own_split(topology, tmp_path, monkeypatch):
    from autotune.script.spec import ScriptSpec
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    evaluate = _evaluate(topology, tmp_path,
                         script=ScriptSpec.scanned((sys.executable, str(script))))
    out = evaluate(Config(), "throughput")
    assert out.outcome == Outcome.OK, out.reason
    split = split_from(out.split)
    assert split.source == "script" and split.step_s == pytest.approx(0.1)
    assert split.bottleneck == Bottleneck.COMPUTE and split.share("data") == pytest.approx(0.3)


def test_a_workload_whose_ceiling_cannot_be_taken_says_so_and_keeps_its_window(topology,
                                                                               tmp_path,
                                                                               monkeypatch):
    monkeypatch.setenv("PYTHONPATH", f"{TESTS}{os.pathsep}{REPO}")
    evaluate = _evaluate(topology, tmp_path, workload="ceiling_fails_workload:build")
    try:
        out = evaluate(Config(threads=1), "throughput", ceiling_above=0.0)
    finally:
        evaluate.close()
    assert out.ok and out.throughput and split_from(out.split) is not None
    assert out.ceiling is None
    assert out.note.startswith("the ceiling could not be timed: RuntimeError: sample 0 was read "
                               "already")
