"""Process-group facts a rank needs before and around training: is the backend usable here,
and what did every rank find wrong (so each result names the real cause)."""
from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


def backend_problem(backend: str) -> str | None:
    if backend == "gloo":
        return None if dist.is_gloo_available() else "this torch build has no gloo"
    if backend == "mpi":
        return None if dist.is_mpi_available() else "this torch build has no MPI support"
    if backend == "nccl":
        # DDP here trains CPU tensors; nccl only moves CUDA tensors.
        ok = dist.is_nccl_available() and torch.cuda.is_available()
        return None if ok else "nccl needs CUDA devices, none available"
    if backend == "ccl":
        # Registering is what makes init_process_group("ccl") work: Intel's bindings where they
        # are installed, else autotune's own build (autotune/comm/ccl).
        from ..comm import ccl
        try:
            ccl.register()
            return None
        except Exception as exc:  # noqa: BLE001 - a broken build is as unavailable as a missing one
            return str(exc)
    return f"unknown backend {backend!r}"


def gather_problems(problems: list[str], world_size: int) -> str | None:
    """Every rank's problems, so each rank's result names the real cause, not "another rank"."""
    everyone: list[Any] = [None] * world_size
    dist.all_gather_object(everyone, problems)
    if all(ps == everyone[0] for ps in everyone):   # one rank, or every rank saw the same
        return "; ".join(everyone[0]) or None
    text = "; ".join(f"rank {r}: {p}" for r, ps in enumerate(everyone) for p in ps)
    return text or None
