"""Issue 52, item 4: a rank checks a request's numbers itself before it acts on it (the
configuration's limits, the request's steps, seconds and samples, and the planner's rules it can
judge with its own CPUs): a request is a file, and something else than the planner may have
written it."""
from __future__ import annotations

from dataclasses import replace

import pytest

from autotune.config import Config
from autotune.plan.launch_plan import RankExpect, WorkerRequest
from autotune.worker.bounds import request_problem

EXPECT = RankExpect(cpus=None, threads=1, allocator=None, omp_runtime=None, precision="fp32")
REQUEST = WorkerRequest(workload="mlp", config=Config(nproc=2, threads=1).to_dict(),
                        ranks=(EXPECT, EXPECT))


def test_the_planners_request_is_within_bounds():
    assert request_problem(REQUEST, cpus=2) is None


@pytest.mark.parametrize("field, value, words", [
    ("warmup_steps", 10**9, "request warmup_steps=1000000000: must be an integer from 0 to "
                            "1,000,000"),
    ("max_steps", 10**9, "request max_steps=1000000000"),
    ("min_steps", 0, "request min_steps=0"),
    ("target_seconds", float("inf"), "request target_seconds=inf: must be seconds from 0 to "
                                     "86400"),
    ("serve_s", 10**7, "request serve_s=10000000"),
    ("accuracy_samples", 2**40, "request accuracy_samples="),
    ("checkpoints", 10**6, "request checkpoints="),
    ("leader_throughput", float("nan"), "request leader_throughput=nan"),
    ("warmup_steps", True, "request warmup_steps=True"),
])
def test_a_number_out_of_bounds_is_refused(field, value, words):
    assert words in request_problem(replace(REQUEST, **{field: value}), cpus=2)


def test_steps_that_cannot_be_ordered_are_refused():
    assert "min_steps=50 is more than max_steps=10" in request_problem(
        replace(REQUEST, min_steps=50, max_steps=10), cpus=2)


@pytest.mark.parametrize("knobs, words", [
    ({"dataloader_workers": 100_000}, "dataloader_workers=100000: more than 8,192"),
    ({"dataloader_workers": 8}, "dataloader_workers=8: more than the 2 CPUs a rank can have "
                                "here"),
    ({"global_batch": 33}, "global_batch=33 cannot be split over nproc=2 ranks"),
    ({"threads": 10**6}, "threads=1000000: more than 8,192"),
    ({"backend": "ccl", "ccl_yield": "pause", "ccl_worker_affinity": "shared"},
     "ccl_yield=pause busy-waits"),
])
def test_a_configuration_the_planner_would_refuse_is_refused_by_the_rank(knobs, words):
    config = {**REQUEST.config, **knobs}
    assert words in request_problem(replace(REQUEST, config=config), cpus=2)
