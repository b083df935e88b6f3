"""Where a step's time goes, the ceiling and the fixed costs: measure/split.py's arithmetic on
literal numbers (the worker's timers are tested in tests/integration/test_split_real.py)."""
from __future__ import annotations

import pytest

from autotune.measure.split import (Bottleneck, StepSplit, ceiling_words, diagnosis, fixed_costs,
                                    of_ceiling, split_from, split_of_report)


def test_a_report_of_totals_becomes_seconds_per_step_and_its_shares():
    # 10 steps of 50 ms: 300 ms of data, 10 ms of copy, 150 ms of compute, 20 of optimizer
    split = split_of_report({"data": 0.3, "copy": 0.01, "compute": 0.15, "optimizer": 0.02},
                            10, 0.05)
    assert split.seconds == pytest.approx({"data": 0.03, "copy": 0.001, "compute": 0.015,
                                           "optimizer": 0.002})
    assert split.share("data") == pytest.approx(0.6)
    assert split.other_s == pytest.approx(0.002)
    assert split.part_share(Bottleneck.DATA) == pytest.approx(0.62)
    assert split.bottleneck == Bottleneck.DATA
    assert split.describe() == "step 50.0 ms: data 60%, copy 2%, compute 30%, optimizer 4%, other 4%"
    assert split.brief() == "data 60%, compute 30%"


def test_the_largest_part_is_the_bottleneck_and_the_allreduce_is_communication():
    compute = StepSplit(seconds={"data": 0.002, "compute": 0.03, "optimizer": 0.001}, step_s=0.035)
    assert compute.bottleneck == Bottleneck.COMPUTE
    comm = StepSplit(seconds={"compute": 0.01, "allreduce": 0.03}, step_s=0.042)
    assert comm.bottleneck == Bottleneck.COMMUNICATION
    assert [p for p, _ in comm.parts()][0] == Bottleneck.COMMUNICATION


def test_the_stored_form_reads_back_and_junk_reads_as_none():
    split = StepSplit(seconds={"data": 0.01, "compute": 0.02}, step_s=0.031, source="script")
    assert split_from(split.to_json()) == split
    for junk in (None, "x", {}, {"step_s": 0}, {"step_s": 1.0}, {"step_s": "a", "data": 1},
                 {"step_s": 0.1, "data": -1.0}):
        assert split_from(junk) is None
    assert split_of_report(None, 3, 0.1) is None
    assert split_of_report({"data": 0.1}, 0, 0.1) is None


def test_of_ceiling_and_its_words():
    assert of_ceiling(810.0, 1000.0) == pytest.approx(0.81)
    assert of_ceiling(None, 1000.0) is None and of_ceiling(10.0, None) is None
    assert ceiling_words(0.81) == "81% of the ceiling"
    # a launch faster than a ceiling measured on a slower launch of its class
    assert ceiling_words(1.04) == "at the ceiling"
    assert ceiling_words(None) == ""


def test_the_summary_sentence_names_the_bottleneck():
    data = StepSplit(seconds={"data": 0.06, "compute": 0.03}, step_s=0.1)
    assert diagnosis("the default launch", data, 0.22, device="GPU", workload="resnet50",
                     math="fp32") == ("the default launch reaches 22% of what this GPU does "
                                      "for resnet50 in fp32; 60% of its step waits on data")
    compute = StepSplit(seconds={"data": 0.015, "compute": 0.08}, step_s=0.1)
    assert diagnosis("the recommendation", compute, 0.81, device="GPU", workload="resnet50",
                     math="bf16") == ("the recommendation reaches 81% of what this GPU does for "
                                      "resnet50 in bf16; 80% of its step computes, 15% waits "
                                      "on data")
    assert diagnosis("the default launch", None, None, device="CPU", workload="cnn",
                     math="fp32") == ("the default launch: no ceiling measured for cnn in fp32; "
                                      "its step was not split")


def test_fixed_costs_of_a_fresh_launch_and_of_a_window_of_a_running_one():
    fresh = {"started_at": 100.2, "torch_at": 101.6, "group_at": 101.7, "model_at": 102.5,
             "timed_start_at": 103.0}
    assert fixed_costs(fresh, 100.0) == pytest.approx(
        {"start": 0.2, "imports": 1.4, "group": 0.1, "model": 0.8, "warmup": 0.5})
    window = {**fresh, "request_seen_at": 200.01, "model_at": 200.3, "timed_start_at": 200.6}
    assert fixed_costs(window, 200.0) == pytest.approx({"wait": 0.01, "model": 0.29,
                                                        "warmup": 0.3})
    # a rank that stopped before its window: the stages it reached
    assert fixed_costs({"started_at": 100.5}, 100.0) == {"start": 0.5}
    assert fixed_costs({}, 100.0) is None
