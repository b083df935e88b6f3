"""A landscape: every configuration of a search space measured once on one machine, as a table.

    python3 -m benchmarks.landscape --record [--seconds 5] [--limit N] [--out FILE]
    python3 -m benchmarks.landscape --synthetic formula --out FILE    # made-up, for tests

Recording (landscape_record.py) runs one real trial per configuration of the resolved space
(plus the search's two reference launches), records infeasible ones without running them, and measures accuracy once
per distinct (global batch, precision). Rows are appended to the JSON file as they finish, so an
interrupted recording resumes where it stopped. Replaying the table (`Landscape.evaluator`) lets
a whole search run in a second, which is what benchmarks/search_efficiency.py does.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from autotune.result import Outcome, TrialResult
from autotune.config import Config
from autotune.plan.feasible import ruled_out
from autotune.search.references import reference_configs
from autotune.space.resolve import ResolvedSpace, find_space, load_space, resolve
from autotune.probe.topology import Capabilities, Topology

from .landscape_formats import upgraded

SCHEMA = 1
DATA = Path(__file__).resolve().parent / "data"
ROOT = Path(__file__).resolve().parents[1]


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
        search_efficiency.early_stopping models the windows and acts on it."""
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
# Recording on this machine


def _row(config: Config, role: str, params: dict[str, Any] | None, **fields: Any) -> dict[str, Any]:
    return {"config": config.to_dict(), "role": role, "params": params, "recorded_at": time.time(),
            **fields}


def _short(c: Config) -> str:
    d = Config().to_dict()
    return " ".join(f"{k}={v}" for k, v in c.to_dict().items() if v != d[k]) or "(default launch)"


# ---------------------------------------------------------------------------------------------
# Synthetic landscapes: known answers, any machine, milliseconds


FIXTURE = ROOT / "tests" / "fixtures" / "machines" / "live-epyc-2cpu"


def fixture_topology() -> Topology:
    """The captured 2-core EPYC with every library found (as on the machine these ran on)."""
    from autotune.probe import probe
    t = probe(str(FIXTURE), collect_capabilities=False)
    caps = Capabilities(allocators={"jemalloc": "/lib/libjemalloc.so.2",
                                    "tcmalloc": "/lib/libtcmalloc.so.4"},
                        omp_runtimes={"libgomp": None, "libiomp5": "/lib/libiomp5.so"},
                        backends=("gloo",), numactl=True, numactl_membind=True, taskset=True)
    return dataclasses.replace(t, capabilities=caps)


def _speed_formula(c: Config, rng: random.Random) -> float:
    """A plausible 2-core CNN: bf16 helps a lot, 2x1 beats 1x2 a little, 1 thread alone is slow."""
    threads = c.threads or 2 // c.nproc or 1
    s = 100.0 * (1.55 if c.precision == "bf16" else 1.0)
    s *= {(1, 1): 0.55, (1, 2): 1.0, (2, 1): 1.12}.get((c.nproc, threads), 0.5)
    s *= {"default": 1.0, "jemalloc": 1.03, "tcmalloc": 1.05}[c.allocator]
    s *= 0.96 if c.omp_runtime == "libiomp5" else 1.0
    s *= {"none": 1.0, "taskset": 1.02, "numactl": 1.025}.get(c.binding, 1.0)
    s *= 1.10 if c.batch_size == 64 else 1.0
    if c.precision == "bf16" and c.nproc == 2:
        s *= 0.93  # smaller per-rank GEMMs gain less from bf16
    return s * math.exp(rng.gauss(0.0, 0.02))


def _speed_random(c: Config, rng: random.Random, effects: dict) -> float:
    """Random main effects and pairwise interactions: nothing a hand-made heuristic can know."""
    d = c.to_dict()
    names = ("nproc", "threads", "binding", "allocator", "omp_runtime", "precision", "batch_size")
    s = 100.0
    for n in names:
        s *= effects.setdefault((n, d[n]), math.exp(effects["_rng"].gauss(0.0, 0.15)))
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            s *= effects.setdefault((a, d[a], b, d[b]), math.exp(effects["_rng"].gauss(0.0, 0.05)))
    return s * math.exp(rng.gauss(0.0, 0.02))


def synthetic(kind: str = "formula", seed: int = 0, seconds: float = 5.0) -> Landscape:
    """A complete landscape of the CPU space on the fixture machine, from a formula or from
    random effects; accuracy falls with global batch and a little with bf16."""
    topology = fixture_topology()
    space = resolve(load_space(find_space("cpu")), topology)
    rng = random.Random(seed)
    effects: dict = {"_rng": random.Random(seed + 1000)}
    land = Landscape({"schema": SCHEMA, "fingerprint": f"synthetic-{kind}-{seed}",
                      "topology": topology.to_json(), "space": space.to_json(),
                      "library_versions": {}, "workload": f"synthetic:{kind}",
                      "target_seconds": seconds, "rows": {}, "accuracy": {}, "synthetic": True})
    configs = [(role, c, None) for role, c in reference_configs(topology, Config())]
    configs += [("grid", space.to_config(p), p) for p in space.grid()]
    for role, c, params in configs:
        reason = ruled_out(c, space, topology)
        if reason:
            land.rows[c.key()] = _row(c, role, params, outcome=Outcome.INFEASIBLE, reason=reason,
                                      seconds=0.0, throughput=None)
            continue
        speed = _speed_formula(c, rng) if kind == "formula" else _speed_random(c, rng, effects)
        land.rows[c.key()] = _row(c, role, params, outcome=Outcome.OK, throughput=speed,
                                  seconds=round(seconds + 4.0 + rng.uniform(0, 1.5), 3))
        k = math_key(c)
        if k not in land.accuracy:
            acc = 0.80 - 0.0001 * c.global_batch_size - (0.002 if c.precision == "bf16" else 0.0)
            land.accuracy[k] = {"outcome": Outcome.OK, "accuracy": acc, "seconds": 20.0,
                                "config": c.to_dict()}
    return land


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.landscape", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--record", action="store_true", help="measure the grid on this machine")
    what.add_argument("--synthetic", choices=("formula", "random"), help="write a made-up landscape")
    p.add_argument("--seconds", type=float, default=5.0,
                   help="timed window per trial (default 5, what a 30-minute search uses)")
    p.add_argument("--limit", type=int, help="launch at most N new trials this run, then stop")
    p.add_argument("--out", help="landscape file (default benchmarks/data/landscape-<fp>.json)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workload", default="cnn")
    p.add_argument("--quality-samples", type=int,
                   help="training samples of each accuracy run (default: the search's)")
    args = p.parse_args(argv)
    if args.synthetic:
        if not args.out:
            p.error("--synthetic needs --out")
        synthetic(args.synthetic, args.seed, args.seconds).save(args.out)
        print(f"wrote {args.out}")
        return 0
    from .landscape_record import record
    record(out=args.out, seconds=args.seconds, limit=args.limit, workload=args.workload,
           quality_samples=args.quality_samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
