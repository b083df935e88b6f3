"""A landscape: every configuration of a search space measured once on one machine, as a table.

This module is the one owner of a recorded landscape's file: reading it (`Landscape.load`, files
of earlier versions through formats.py) and writing it (`Landscape.save`, `_row`). The machines
recorded so far are data/landscape-<fingerprint>.json beside it; synthetic.py makes one up.

Recording (record.py: `python3 -m benchmarks.landscapes.record`) runs one real trial per configuration of the resolved space
(plus the search's two reference launches), records infeasible ones without running them, and measures accuracy once
per distinct (global batch, precision). Rows are appended to the JSON file as they finish, so an
interrupted recording resumes where it stopped. Replaying the table (`Landscape.evaluator`) lets
a whole search run in a second, which is what benchmarks/replay/efficiency.py does.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any, Iterator

from autotune.result import Outcome, TrialResult
from autotune.config import Config
from autotune.space.resolve import ResolvedSpace, find_space, load_space
from autotune.probe.topology import Topology

from .formats import upgraded

SCHEMA = 1
DATA = Path(__file__).resolve().parent / "data"


def default_path(fingerprint: str) -> Path:
    return DATA / f"landscape-{fingerprint}.json"


def math_key(config: Config) -> str:
    return f"{config.global_batch_size}:{config.precision}"


@dataclasses.dataclass
class Landscape:
    """The recorded table, with what a replay needs: the machine, the space, the rows."""
    data: dict[str, Any]

    @classmethod
    def load(cls, path: str | Path) -> "Landscape":
        with open(path, encoding="utf-8") as f:
            return cls(upgraded(json.load(f)))

    def save(self, path: str | Path) -> None:
        """Atomic: a recording killed mid-write keeps the previous table intact."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        os.replace(tmp, path)

    @property
    def rows(self) -> dict[str, dict[str, Any]]:
        return self.data.setdefault("rows", {})

    @property
    def accuracy(self) -> dict[str, dict[str, Any]]:
        return self.data.setdefault("accuracy", {})

    def topology(self) -> Topology:
        return Topology.from_json(self.data["topology"])

    def space(self) -> ResolvedSpace:
        """The resolved space as recorded (its choices), with the constraint rules of its file."""
        s = self.data["space"]
        spec = load_space(find_space(_space_ref(s["source"], s["name"])))
        return ResolvedSpace(name=s["name"], source=s["source"],
                             knobs={k: tuple(v) for k, v in s["knobs"].items()},
                             fixed=dict(s["fixed"]), constraints=tuple(s["constraints"]),
                             notes=tuple(s.get("notes", ())),
                             topology_names=dict(s["topology_names"]), rules=spec.constraints)

    def grid_rows(self) -> Iterator[tuple[dict[str, Any], dict[str, Any] | None]]:
        """(params, row or None when not recorded yet) in the space's grid order."""
        space = self.space()
        for params in space.grid():
            yield params, self.rows.get(space.to_config(params).key())

    def accuracy_of(self, config: Config) -> float | None:
        a = self.accuracy.get(math_key(config))
        return a.get("accuracy") if a and a.get("outcome") == Outcome.OK else None

    def default_accuracy(self) -> float | None:
        return self.accuracy_of(Config())

    def feasible_within(self, config: Config, max_drop_pp: float) -> bool:
        """The search's rule: accuracy at most `max_drop_pp` points below the default launch's."""
        acc, base = self.accuracy_of(config), self.default_accuracy()
        if acc is None:
            return False
        return base is None or (base - acc) * 100.0 <= max_drop_pp

    def oracle(self, max_drop_pp: float = 1.0) -> tuple[float, dict[str, Any] | None]:
        """Best throughput of the exhaustive grid among configs within the accuracy tolerance."""
        best, where = 0.0, None
        for _, row in self.grid_rows():
            if row and row["outcome"] == Outcome.OK and row["throughput"] and row["throughput"] > best \
                    and self.feasible_within(Config.from_dict(row["config"]), max_drop_pp):
                best, where = row["throughput"], row
        return best, where

    def missing(self) -> int:
        return sum(1 for _, row in self.grid_rows() if row is None)

    def evaluator(self, clock: "SimClock"):
        """An `Evaluate` answering from the table; each answer advances `clock` by what the real
        trial cost. A configuration not recorded (partial landscape) answers `unavailable` at no
        cost, so a replay of an incomplete table still runs (and says how much is missing).
        A row is a whole trial: the leader a search races (`leader`) is not acted on here;
        replay/efficiency.early_stopping models the windows and acts on it."""
        def evaluate(config: Config, mode: str, *, seed: int = 0, samples: int | None = None,
                     leader: float | None = None) -> TrialResult:
            if mode == "accuracy":   # one recorded accuracy per math: every seed gives it
                a = self.accuracy.get(math_key(config)) or {"outcome": Outcome.UNAVAILABLE}
                clock.t += float(a.get("seconds") or 0.0)
                return TrialResult(outcome=a["outcome"], accuracy=a.get("accuracy"),
                                   seconds=float(a.get("seconds") or 0.0))
            row = self.rows.get(config.key())
            if row is None:
                return TrialResult(outcome=Outcome.UNAVAILABLE, reason="not in the landscape")
            clock.t += float(row.get("seconds") or 0.0)
            return TrialResult(outcome=row["outcome"], reason=row.get("reason", ""),
                               throughput=row.get("throughput"),
                               seconds=float(row.get("seconds") or 0.0),
                               split=row.get("split"))   # a modelled step's, where it has one
        return evaluate


def _space_ref(source: str, name: str) -> str:
    """How to find a recorded landscape's space file: a built-in one by its name in THIS checkout
    (the recorded path is absolute and may point into another checkout, whose cpu.yaml may have
    knobs this code does not know), a variant outside the built-ins by its path."""
    src = Path(source)
    if src.parent.name in ("builtin", "search_spaces") or not src.is_file():
        return name
    return source


class SimClock:
    def __init__(self) -> None:
        self.t = 0.0

    def elapsed(self) -> float:
        return self.t


# ---------------------------------------------------------------------------------------------
# A row, as recording writes it (record.py, many_cores.py, synthetic.py, model_machines.py)


def _row(config: Config, role: str, params: dict[str, Any] | None, **fields: Any) -> dict[str, Any]:
    return {"config": config.to_dict(), "role": role, "params": params, "recorded_at": time.time(),
            **fields}


def _short(c: Config) -> str:
    d = Config().to_dict()
    return " ".join(f"{k}={v}" for k, v in c.to_dict().items() if v != d[k]) or "(default launch)"
