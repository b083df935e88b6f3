"""The rows of `autotune report`: one measured configuration, one group of failures, and the
Pareto front over rows. Values only; format.py writes them for people."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..measure.contention import disturbed
from ..measure.stats import busy


@dataclass(frozen=True, kw_only=True)
class Row:
    number: int
    role: str
    throughput: float
    x_default: float | None
    accuracy: float | None
    feasible: bool                   # shown within the accuracy tolerance, every constraint met
    changes: dict[str, Any]          # knobs that differ from the default launch
    cpu_share: float | None = None   # of rank 0's threads' CPU time it got; None = not recorded
    outside_share: float | None = None  # of its cores taken by other processes (contention.py)
    split: dict[str, Any] | None = None  # where its step went (measure/split.StepSplit stored)
    of_ceiling: float | None = None     # its throughput over its math class's ceiling
    # the report's "tol" column: ok (shown within, or no accuracy to judge), ? (not shown yet:
    # measured and unresolved, or not measured), no (beyond, failed, or another constraint)
    tolerance: str = "ok"

    @property
    def disturbed(self) -> bool:
        return disturbed(self.outside_share)

    @property
    def busy(self) -> bool:
        """Disturbed; for a trial stored before contention was measured, a low cpu_share."""
        return self.disturbed if self.outside_share is not None else busy(self.cpu_share)

    def to_json(self) -> dict[str, Any]:
        return {"trial": self.number, "role": self.role, "throughput": self.throughput,
                "x_default": self.x_default, "accuracy": self.accuracy,
                "feasible": self.feasible, "tolerance": self.tolerance, "changes": self.changes,
                "cpu_share": self.cpu_share, "outside_share": self.outside_share,
                "busy": self.busy, "split": self.split, "of_ceiling": self.of_ceiling}


@dataclass(frozen=True, kw_only=True)
class Failure:
    outcome: str
    count: int
    example: str
    trial: int | None


def pareto_front(rows: list[Row]) -> list[Row]:
    """Rows no other row beats in both throughput and accuracy (unknown accuracy ranks lowest)."""
    def acc(r: Row) -> float:
        return r.accuracy if r.accuracy is not None else float("-inf")

    front = [r for r in rows
             if not any(o.throughput >= r.throughput and acc(o) >= acc(r)
                        and (o.throughput > r.throughput or acc(o) > acc(r)) for o in rows)]
    return sorted(front, key=lambda r: r.throughput, reverse=True)
