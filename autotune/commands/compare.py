"""`autotune compare`: two configurations measured in alternating rounds on the workload the user
names, with the same statistics as the search's verification."""
from __future__ import annotations

import contextlib

from dataclasses import dataclass, field
from typing import Any

from ..config import Config
from ..errors import ConfigError
from ..plan.feasible import infeasible_reason
from ..probe import probe
from ..progress import SILENT, Progress
from ..recommend.compare import Comparison, compare as interleaved, describe
from ..run.evaluate import live_evaluator
from ..run.trials_dir import check_results
from .common import Workload
from .search_request import check_workload


@dataclass(frozen=True, kw_only=True)
class CompareRequest:
    a: Config
    b: Config
    rounds: int = 4
    workload: Workload = field(default_factory=lambda: Workload(seconds=3.0))
    timeout_s: float = 180.0


@dataclass(frozen=True)
class Compared:
    comparison: Comparison
    unit: str               # "samples/s", or a script's "per s (metric)"

    @property
    def exit_code(self) -> int:
        return 0 if self.comparison.stats is not None else 1

    def to_json(self) -> dict[str, Any]:
        return self.comparison.to_json()

    def text(self) -> str:
        return describe(self.comparison, self.unit)


def compare(req: CompareRequest, progress: Progress = SILENT) -> Compared:
    """A and B in alternating rounds (progress.verify_start names each window's side)."""
    check_workload(req.workload.workload, req.workload.script)
    topology = probe(None)
    for side, config in (("A", req.a), ("B", req.b)):
        why = infeasible_reason(config, topology)
        if why:
            raise ConfigError(f"configuration {side} cannot run here: {why}")
    settings = req.workload.settings(timeout_s=req.timeout_s)
    check_results(settings.results_dir)   # trial folders the user's alone, before any trial
    with contextlib.closing(live_evaluator(topology, settings, adapt_timeout=False)) as evaluate:
        result = interleaved(req.a, req.b, evaluate, rounds=req.rounds, progress=progress)
    return Compared(result, "samples/s" if settings.script is None else "per s (metric)")
