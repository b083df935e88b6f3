"""Registering the built extension as torch.distributed's "ccl" backend (CPU tensors)."""
from __future__ import annotations

import atexit
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
    # A script may return with collectives still in flight (an all-reduce it never waited for,
    # a Python callback on its future). Completed during the interpreter's teardown, they made
    # the progress thread take the GIL, which Python answers by ending the thread inside a
    # noexcept destructor: SIGABRT at exit (backend.cpp, "Exit"). atexit handlers run before that
    # teardown, with Python whole: wait there, the GIL released, until every group's queued
    # collectives are done (each has its group's deadline). Registered here, early, it runs after
    # the script's own atexit handlers, which may still start collectives.
    atexit.register(ext.drain_all)
