"""The device a rank trains on and the precision machinery that goes with it.

`decide` is pure: (config, LOCAL_RANK, what torch.cuda reports) -> a `DeviceSetup`, so both the CPU
and the CUDA decisions are unit-tested on a machine without a GPU. The few functions below it
turn a setup into torch objects (autocast context, GradScaler, DDP arguments) and are the only
ones that touch CUDA, and only for a CUDA setup.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Callable

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class DeviceProblem(Exception):
    """The rank cannot use the device its configuration asks for (classified unavailable)."""


@dataclass(frozen=True, kw_only=True)
class DeviceSetup:
    type: str                   # "cpu" | "cuda"
    index: int | None           # the CUDA device of this rank (LOCAL_RANK); None on CPU
    precision: str              # autocast dtype: "fp32" (autocast off) | "bf16" | "fp16"
    scaler: bool                # GradScaler on: fp16 gradients underflow without loss scaling
    pin_memory: bool            # batches in page-locked memory, copied without blocking

    def __post_init__(self) -> None:
        if self.type not in ("cpu", "cuda"):
            raise ValueError(f"device type {self.type!r}: expected cpu or cuda")
        if (self.type == "cuda") != (self.index is not None):
            raise ValueError("a CUDA setup needs a device index and a CPU setup none")
        if self.precision not in ("fp32", *DTYPES):
            raise ValueError(f"precision {self.precision!r}: expected fp32, bf16 or fp16")

    @property
    def name(self) -> str:
        return "cpu" if self.index is None else f"cuda:{self.index}"


def decide(config: dict[str, Any], local_rank: int, *, cuda_available: bool,
           device_count: int) -> DeviceSetup:
    """The rank's device and precision machinery. Raises DeviceProblem with the cause."""
    precision = config.get("precision", "fp32")
    pin = bool(config.get("pin_memory"))
    if config.get("device", "cpu") != "cuda":
        if pin:
            raise DeviceProblem("pin_memory=true pins host memory for copies to a GPU; "
                                "this rank trains on the CPU (device=cpu)")
        # fp16 on CPU keeps the scaler too: the gradients underflow the same way.
        return DeviceSetup(type="cpu", index=None, precision=precision,
                           scaler=precision == "fp16", pin_memory=False)
    if not cuda_available:
        raise DeviceProblem("device=cuda but torch.cuda.is_available() is false "
                            "(a CPU-only torch, no driver, or CUDA_VISIBLE_DEVICES hides every GPU)")
    if not 0 <= local_rank < device_count:
        raise DeviceProblem(f"LOCAL_RANK={local_rank} but this rank sees {device_count} GPU(s) "
                            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}): "
                            f"one rank per GPU")
    return DeviceSetup(type="cuda", index=local_rank, precision=precision,
                       scaler=precision == "fp16", pin_memory=pin)


def decide_here(config: dict[str, Any], local_rank: int) -> DeviceSetup:
    """`decide` with what this process's torch reports (CUDA is only asked for a CUDA config:
    touching it on a CPU trial would initialise a driver the trial does not use)."""
    if config.get("device", "cpu") != "cuda":
        return decide(config, local_rank, cuda_available=False, device_count=0)
    available = torch.cuda.is_available()
    return decide(config, local_rank, cuda_available=available,
                  device_count=torch.cuda.device_count() if available else 0)


def activate(setup: DeviceSetup) -> torch.device:
    """Make the rank's GPU current before the process group exists: NCCL binds its
    communicator to the current device, and every rank on cuda:0 would deadlock or crash."""
    if setup.index is not None:
        torch.cuda.set_device(setup.index)
    return torch.device(setup.name)


def autocast(setup: DeviceSetup) -> Callable[[], contextlib.AbstractContextManager]:
    dtype = DTYPES.get(setup.precision)
    if dtype is None:
        return contextlib.nullcontext
    return lambda: torch.autocast(setup.type, dtype=dtype)


def grad_scaler(setup: DeviceSetup) -> torch.amp.GradScaler:
    return torch.amp.GradScaler(setup.type, enabled=setup.scaler)


def ddp_kwargs(setup: DeviceSetup) -> dict[str, Any]:
    """DDP on a GPU is told its single device, so it never scatters inputs over several."""
    if setup.index is None:
        return {}
    return {"device_ids": [setup.index], "output_device": setup.index}


def collective_device(setup: DeviceSetup, backend: str) -> torch.device:
    """Where small control tensors (step counts, stop flags) live: NCCL moves CUDA tensors only."""
    return torch.device(setup.name) if backend == "nccl" else torch.device("cpu")


def to_device(setup: DeviceSetup, tensor: torch.Tensor) -> torch.Tensor:
    if setup.index is None:
        return tensor
    # non_blocking only overlaps with compute when the source is pinned; otherwise it is a no-op
    return tensor.to(setup.name, non_blocking=setup.pin_memory)


def synchronize(setup: DeviceSetup) -> None:
    """Wait for the step's kernels: CUDA runs asynchronously, so without this a step's time is
    the time to enqueue it, and the warmup-based window length would be off by orders."""
    if setup.index is not None:
        torch.cuda.synchronize(setup.index)


def in_force(setup: DeviceSetup) -> dict[str, Any]:
    """The device actually current in this process (for the in-force check)."""
    if setup.index is None:
        return {"device": "cpu", "visible_gpus": None}
    return {"device": f"cuda:{torch.cuda.current_device()}",
            "visible_gpus": os.environ.get("CUDA_VISIBLE_DEVICES")}


def is_oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom is not None and isinstance(exc, oom)) or "can't allocate memory" in str(exc) \
        or "CUDA out of memory" in str(exc)
