"""The rank's device, autocast, GradScaler and data pipeline, decided and run on this CPU-only
machine: the CUDA decisions are pure functions of what torch.cuda would report."""
from __future__ import annotations

import pytest
import torch

from autotune.worker import device
from autotune.worker import in_force as inforce
from autotune.worker import data as pipeline
from autotune.plan.launch_plan import RankExpect
from autotune.worker.workloads import get_workload, rank_slice


def test_cpu_rank_keeps_the_cpu_and_a_scaler_only_for_fp16():
    for precision, scaler in (("fp32", False), ("bf16", False), ("fp16", True)):
        setup = device.decide({"precision": precision}, 3, cuda_available=True, device_count=8)
        assert (setup.type, setup.index, setup.name, setup.scaler) == ("cpu", None, "cpu", scaler)
        assert device.ddp_kwargs(setup) == {}
        assert device.collective_device(setup, "gloo") == torch.device("cpu")


@pytest.mark.parametrize("precision,scaler", [("fp32", False), ("bf16", False), ("fp16", True)])
def test_cuda_rank_takes_the_gpu_of_its_local_rank(precision, scaler):
    cfg = {"device": "cuda", "precision": precision, "pin_memory": True}
    setup = device.decide(cfg, 5, cuda_available=True, device_count=8)
    assert (setup.type, setup.index, setup.name) == ("cuda", 5, "cuda:5")
    assert setup.scaler is scaler and setup.pin_memory
    assert device.ddp_kwargs(setup) == {"device_ids": [5], "output_device": 5}
    assert device.collective_device(setup, "nccl") == torch.device("cuda:5")
    assert device.collective_device(setup, "gloo") == torch.device("cpu")


@pytest.mark.parametrize("cfg,rank,available,count,needle", [
    ({"device": "cuda"}, 0, False, 0, "torch.cuda.is_available() is false"),
    ({"device": "cuda"}, 4, True, 4, "LOCAL_RANK=4 but this rank sees 4 GPU(s)"),
    ({"pin_memory": True}, 0, True, 1, "pin_memory=true"),
])
def test_impossible_devices_are_a_problem_with_the_cause(cfg, rank, available, count, needle):
    with pytest.raises(device.DeviceProblem, match=needle.replace("(", r"\(").replace(")", r"\)")):
        device.decide(cfg, rank, cuda_available=available, device_count=count)


def test_cuda_asked_of_this_cpu_only_torch_is_a_problem():
    assert not torch.cuda.is_available()
    with pytest.raises(device.DeviceProblem, match="is_available"):
        device.decide_here({"device": "cuda"}, 0)
    assert device.decide_here({}, 0).name == "cpu"


def test_autocast_and_scaler_on_cpu_are_what_the_in_force_check_sees():
    bf16 = device.decide({"precision": "bf16"}, 0, cuda_available=False, device_count=0)
    with device.autocast(bf16)():
        assert inforce.current_autocast("cpu") == "bf16"
        assert inforce.current_autocast("cuda") == "fp32"   # a CPU autocast leaves CUDA alone
    fp32 = device.decide({}, 0, cuda_available=False, device_count=0)
    with device.autocast(fp32)():
        assert inforce.current_autocast("cpu") == "fp32"
    fp16 = device.decide({"precision": "fp16"}, 0, cuda_available=False, device_count=0)
    assert device.grad_scaler(fp16).is_enabled() and not device.grad_scaler(bf16).is_enabled()
    assert device.activate(fp32) == torch.device("cpu")
    assert device.in_force(fp32) == {"device": "cpu", "visible_gpus": None}
    x = torch.ones(2)
    assert device.to_device(fp32, x) is x


def test_in_force_device_and_backend_differences():
    expect = RankExpect(cpus=None, threads=None, allocator=None, omp_runtime=None,
                        precision="bf16", device="cuda:1", backend="nccl")
    seen = {"affinity": [0], "num_threads": 1, "allocator": "default", "omp_runtime": "libgomp",
            "mems_allowed": "0", "autocast_dtype": "bf16", "device": "cuda:0", "backend": "gloo"}
    assert inforce.differences(expect, seen) == ["device: planned cuda:1, in force cuda:0",
                                                 "backend: planned nccl, in force gloo"]
    assert inforce.differences(expect, {**seen, "device": "cuda:1", "backend": "nccl"}) == []


def test_setup_rejects_inconsistent_values():
    with pytest.raises(ValueError):
        device.DeviceSetup(type="cuda", index=None, precision="fp32", scaler=False,
                           pin_memory=False)
    with pytest.raises(ValueError):
        device.DeviceSetup(type="tpu", index=None, precision="fp32", scaler=False,
                           pin_memory=False)


def test_oom_classification_covers_cuda_messages():
    assert device.is_oom(MemoryError())
    assert device.is_oom(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not device.is_oom(RuntimeError("shape mismatch"))


# ---- the data pipeline -----------------------------------------------------------------------
def test_cpu_trials_keep_in_process_batches_unless_a_pipeline_knob_is_set():
    assert not pipeline.in_use({})
    assert pipeline.in_use({"dataloader_workers": 2})
    assert pipeline.in_use({"device": "cuda"})
    spec = get_workload("cnn", {"image_size": 16})
    get = pipeline.batch_source(spec, {}, rank=1, batch_size=4, world_size=2, seed=0)
    x, y = get(3)
    ex, ey = spec.make_batch(*rank_slice(3, 1, 4, 2), 0)
    assert torch.equal(x, ex) and torch.equal(y, ey)


def test_augmentation_is_a_crop_and_flip_seeded_by_the_sample():
    img = torch.arange(3 * 16 * 16, dtype=torch.float32).view(3, 16, 16)
    a, b = pipeline.augment(img, 7, 0), pipeline.augment(img, 7, 0)
    assert torch.equal(a, b) and a.shape == img.shape
    outs = [pipeline.augment(img, i, 0) for i in range(32)]
    assert any(not torch.equal(o, img) for o in outs)
    flat = torch.randn(8)
    assert pipeline.augment(flat, 1, 0) is flat  # not an image: passes through


def test_pipeline_in_the_rank_serves_steps_in_order():
    spec = get_workload("cnn", {"image_size": 16})
    get = pipeline.batch_source(spec, {"device": "cuda"}, rank=0, batch_size=4, world_size=2,
                                seed=0)
    x0, y0 = get(0)
    assert x0.shape == (4, 3, 16, 16) and y0.shape == (4,)
    start, count = rank_slice(0, 0, 4, 2)
    _, labels = spec.make_batch(start, count, 0)
    assert torch.equal(y0, labels)         # augmentation keeps each sample's label
    with pytest.raises(RuntimeError, match="in order"):
        get(5)


