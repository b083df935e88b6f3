"""The device and data path in real ranks: dataloader workers, a cuda trial on a CPU-only machine.
(The pure decisions are in tests/unit/worker/test_device.py.)
"""
from __future__ import annotations

import pytest
import torch
from autotune.worker import data as pipeline
from autotune.worker.workloads import get_workload, rank_slice


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_dataloader_workers_give_the_same_batches_as_the_rank_itself(device):
    # a GPU's pipeline crops and flips in the rank or in workers alike; a CPU's workers make the
    # rank's own batches, untouched (issue 51: the same math as the default launch's)
    spec = get_workload("cnn", {"image_size": 16})
    inline = pipeline.batch_source(spec, {"device": device}, rank=1, batch_size=4,
                                   world_size=2, seed=3)
    workers = pipeline.batch_source(spec, {"device": device, "dataloader_workers": 2}, rank=1,
                                    batch_size=4, world_size=2, seed=3)
    try:
        for step in range(5):
            (a, ya), (b, yb) = inline(step), workers(step)
            assert torch.equal(a, b) and torch.equal(ya, yb)
    finally:
        workers.close()
    if device == "cpu":
        x, y = spec.make_batch(*rank_slice(4, 1, 4, 2), 3)
        assert torch.equal(a, x) and torch.equal(ya, y)


# ---- real ranks on this CPU-only machine ------------------------------------------------------
@pytest.mark.slow
def test_a_cuda_trial_here_is_unavailable_and_says_why(tmp_path):
    from test_worker import launch, _request
    from autotune.plan.launch_plan import EXIT_BACKEND_UNAVAILABLE
    req = _request(1, config={"device": "cuda", "backend": "nccl"})
    codes, results, logs = launch(tmp_path, req)
    assert codes == [EXIT_BACKEND_UNAVAILABLE], logs
    assert results[0]["status"] == "unavailable"
    assert "torch.cuda.is_available() is false" in results[0]["reason"]


@pytest.mark.slow
def test_two_cpu_ranks_train_through_dataloader_workers(tmp_path):
    from test_worker import _check_ok, launch, _request
    req = _request(2, workload="cnn", config={"dataloader_workers": 1},
                   expect={"device": "cpu", "backend": "gloo"})
    results = _check_ok(*launch(tmp_path, req, env={"OMP_NUM_THREADS": "1"}), req)
    assert [(r["in_force"]["device"], r["in_force"]["backend"]) for r in results] == \
        [("cpu", "gloo")] * 2
