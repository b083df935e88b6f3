"""The built-in cnn, in a process that keeps a thread busy from its first model on, windows and
the waits between them alike: what a collective backend's progress thread that polls while idle
does to the cores of the next window timed. run/warm.py must close such a launch, on this
machine and across hosts (where each rank reports its own idle CPU, run/spanning_session.py)."""
from __future__ import annotations

import dataclasses
import threading
import time

from autotune.workloads import get_workload

_busy: list[threading.Thread] = []


def _poll() -> None:
    while True:          # a poller: it yields the CPU but never sleeps
        time.sleep(0)


def build(**args):
    cnn = get_workload("cnn", args)

    def build_model(seed: int):
        if not _busy:
            _busy.append(threading.Thread(target=_poll, daemon=True, name="poller"))
            _busy[0].start()
        return cnn.build_model(seed)

    return dataclasses.replace(cnn, name="idle_spinner", build_model=build_model)
