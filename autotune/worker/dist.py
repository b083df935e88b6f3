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
        # Importing the bindings is what registers "ccl" with torch.distributed, so it must
        # happen before init_process_group. torch_ccl is the bindings' older import name.
        errors = []
        for mod in ("oneccl_bindings_for_pytorch", "torch_ccl"):
            try:
                __import__(mod)
                return None
            except Exception as exc:  # noqa: BLE001 - broken bindings are as unavailable as missing
                errors.append(f"{mod}: {type(exc).__name__}: {exc}")
        return ("ccl needs oneccl_bindings_for_pytorch (pip package oneccl_bind_pt, not on PyPI, "
                "deprecated upstream), which does not import (" + "; ".join(errors) + ")")
    return f"unknown backend {backend!r}"


def gather_problems(problems: list[str], world_size: int) -> str | None:
    """Every rank's problems, so each rank's result names the real cause, not "another rank"."""
    everyone: list[Any] = [None] * world_size
    dist.all_gather_object(everyone, problems)
    if all(ps == everyone[0] for ps in everyone):   # one rank, or every rank saw the same
        return "; ".join(everyone[0]) or None
    text = "; ".join(f"rank {r}: {p}" for r, ps in enumerate(everyone) for p in ps)
    return text or None
