"""Registering the built extension as torch.distributed's "ccl" backend (CPU tensors)."""
from __future__ import annotations

import os
from datetime import timedelta

from .build import load_extension
from .env import defaults


def register_extension() -> None:
    import torch.distributed as dist
    ext = load_extension()

    def create(store, rank: int, size: int, timeout: timedelta):
        # oneCCL reads its settings from the environment when the communicator is made: fill in
        # what a script started without autotune's plan lacks (never what the user set).
        for key, value in defaults(dict(os.environ), rank, size).items():
            os.environ.setdefault(key, value)
        return ext.create(store, rank, size, timeout)

    dist.Backend.register_backend("ccl", create, devices=["cpu"])
