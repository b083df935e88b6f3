"""How fast each search strategy finds the best configuration of a recorded landscape.

    python3 -m benchmarks.replay.efficiency                     # this machine's landscape
    python3 -m benchmarks.replay.efficiency --landscape FILE --seeds 20
    python3 -m benchmarks.replay.efficiency --synthetic random  # a made-up landscape

Replays the table (benchmarks/landscapes/table.py) instead of running trials, so a whole search takes
about a second. Strategies, each over the same grid and with the same costs:

  autotune  run_search itself (references, dedup, infeasibility, accuracy once per math), with
            make_sampler(seed), in an in-memory Optuna storage. Phase 1 uses the options a
            30-minute `autotune search` uses (its stopping rules decide); phase 2 resumes the
            study with no stopping rule, to see when it would reach 95% / 99% of the oracle.
  random    uniform over the grid without replacement; infeasible configs cost nothing.
  grid      the space's grid order (HyperTune's order: first knob slowest).

A launched trial costs its recorded wall seconds; an accuracy measurement (once per global batch
and precision, for every strategy) costs its recorded seconds. Oracle: best throughput of the grid
within the accuracy tolerance (at most 1 pp below the default launch), the search's own rule.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import optuna

from autotune.result import Outcome
from autotune.search.budget import plan_budget
from autotune.config import Config
from autotune.progress import Silent
from autotune.search.loop import run_search
from autotune.plan.feasible import ruled_out
from autotune.search.options import SearchOptions
from autotune.search.references import make_sampler
from autotune.study.storage import open_study

from benchmarks import RESULTS
from benchmarks.landscapes.synthetic import synthetic
from benchmarks.landscapes.table import DATA, Landscape, SimClock, math_key

from .report import INF, LEVELS, _pct, _summarise, _verdict, table
from .variants import early_stopping, warm_start_params



class _Trace:
    """Best feasible throughput after each launched trial, on the simulated clock."""

    def __init__(self, land: Landscape, oracle: float, max_drop: float, clock: SimClock):
        self.land, self.oracle, self.max_drop, self.clock = land, oracle, max_drop, clock
        self.launched, self.best = 0, 0.0
        self.reached: dict[float, tuple[int, float]] = {}

    def saw(self, config: Config, outcome: str, throughput: float | None) -> None:
        if outcome == Outcome.INFEASIBLE or config.key() not in self.land.rows:
            return  # never launched: costs nothing and is not a trial
        self.launched += 1
        if outcome == Outcome.OK and throughput and self.land.feasible_within(config, self.max_drop):
            self.best = max(self.best, throughput)
        for level in LEVELS:
            if level not in self.reached and self.best >= level * self.oracle:
                self.reached[level] = (self.launched, self.clock.t)

    def done(self) -> bool:
        return len(self.reached) == len(LEVELS)

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {"launched": self.launched, "seconds": round(self.clock.t, 1),
                               "best_fraction": self.best / self.oracle if self.oracle else 0.0}
        for level in LEVELS:
            n, s = self.reached.get(level, (INF, INF))
            out[f"trials_{_pct(level)}"], out[f"seconds_{_pct(level)}"] = n, s
        return out


class _Reached(Exception):
    pass


def run_autotune(land: Landscape, seed: int, oracle: float, max_drop: float,
                 budget_s: float = 1800.0, patience: int | None = None,
                 warm_start: bool = False, startup_draws: int | None = None,
                 guide: str | None = None, sampler: str = "tpe",
                 early_stop: bool = False, phase2_s: float | None = None) -> dict[str, Any]:
    """`phase2_s`: simulated seconds phase 2 may go on (None: until 99% or the grid's end; a
    table of thousands of configurations of which a few reach 95% takes hours of CPU else)."""
    space, topology = land.space(), land.topology()
    clock = SimClock()
    evaluate = (early_stopping(land, clock, seed) if early_stop
                else land.evaluator(clock))
    trace = _Trace(land, oracle, max_drop, clock)
    study = open_study(optuna.storages.InMemoryStorage(), f"replay-{seed}",
                       sampler=make_sampler(seed, sampler))
    variant = {**({} if startup_draws is None else {"startup_draws": startup_draws}),
               **({} if guide is None else {"guide": guide}), "early_stop": early_stop}

    class Tracing(Silent):
        def trial_end(self, *, record, seconds: float) -> None:
            trace.saw(record.config, record.outcome, record.throughput)
            if stop_when_done and trace.done():
                raise _Reached

    if warm_start:
        for params in warm_start_params(space, topology):
            study.enqueue_trial(params)
    # Phase 1: what `autotune search --budget 30m` does, its own stopping rules included.
    bp = plan_budget(budget_s)
    stop_when_done = False
    first = run_search(study, space=space, topology=topology, evaluate=evaluate, clock=clock,
                       progress=Tracing(),
                       options=SearchOptions(budget_s=budget_s, verify_reserve_s=bp.verify_reserve_s,
                                             min_trial_s=bp.min_trial_s, seed=seed,
                                             max_accuracy_drop=max_drop,
                                             **({"patience": patience} if patience else {}),
                                             **variant))
    at_stop = {"stop_reason": first.stop_reason, "launched": trace.launched,
               "seconds": round(clock.t, 1),
               "best_fraction": trace.best / oracle if oracle else 0.0}
    # Phase 2: resume the same study without stopping rules until 99% (or the grid runs out).
    stop_when_done = True
    if not trace.done():
        try:
            run_search(study, space=space, topology=topology, evaluate=evaluate, clock=clock,
                       progress=Tracing(),
                       options=SearchOptions(budget_s=1e12 if phase2_s is None else
                                             clock.t + phase2_s, min_trial_s=0.0, patience=10**9,
                                             seed=seed, max_accuracy_drop=max_drop, **variant))
        except _Reached:
            pass
    return {**trace.result(), "seed": seed, "at_default_stop": at_stop}


def run_walk(land: Landscape, order: list[dict[str, Any]], oracle: float,
             max_drop: float) -> dict[str, Any]:
    """Random or grid search: launch configs in `order`, skipping infeasible ones for free."""
    space, topology = land.space(), land.topology()
    clock = SimClock()
    evaluate = land.evaluator(clock)
    trace = _Trace(land, oracle, max_drop, clock)
    measured_math: set[str] = set()
    for params in order:
        config = space.to_config(params)
        if ruled_out(config, space, topology):
            continue
        ev = evaluate(config, "throughput")
        if ev.outcome == Outcome.OK and math_key(config) not in measured_math:
            measured_math.add(math_key(config))
            evaluate(config, "accuracy")  # the walk has to pay for knowing the accuracy too
        trace.saw(config, ev.outcome, ev.throughput)
        if trace.done():
            break
    return trace.result()


def compare(land: Landscape, seeds: int = 20, max_drop: float = 1.0,
            patience: int | None = None, budget_s: float = 1800.0,
            warm_start: bool = False, startup_draws: int | None = None,
            guide: str | None = None, sampler: str = "tpe",
            early_stop: bool = False, phase2_s: float | None = None) -> dict[str, Any]:
    oracle, where = land.oracle(max_drop)
    if not oracle:
        raise SystemExit("the landscape has no feasible ok configuration: nothing to find")
    space = land.space()
    grid = list(space.grid())
    launchable = sum(1 for p, row in land.grid_rows() if row and row["outcome"] != Outcome.INFEASIBLE)
    started = time.perf_counter()
    runs: dict[str, list[dict[str, Any]]] = {"autotune": [], "random": [], "grid": []}
    for seed in range(seeds):
        t0 = time.perf_counter()
        runs["autotune"].append(run_autotune(land, seed, oracle, max_drop, budget_s, patience,
                                             warm_start, startup_draws, guide, sampler,
                                             early_stop, phase2_s))
        runs["autotune"][-1]["replay_s"] = round(time.perf_counter() - t0, 2)
        order = grid[:]
        random.Random(seed).shuffle(order)
        runs["random"].append({**run_walk(land, order, oracle, max_drop), "seed": seed})
    runs["grid"].append(run_walk(land, grid, oracle, max_drop))
    summary = {name: _summarise(rs) for name, rs in runs.items()}
    at = [r["at_default_stop"] for r in runs["autotune"]]
    summary["autotune"]["at_default_stop"] = {
        "median_launched": statistics.median(a["launched"] for a in at),
        "median_seconds": statistics.median(a["seconds"] for a in at),
        "median_best_fraction": statistics.median(a["best_fraction"] for a in at),
        "min_best_fraction": min(a["best_fraction"] for a in at),
        "share_at_97pct": sum(a["best_fraction"] >= 0.97 for a in at) / len(at),
        "stop_reasons": {k: sum(a["stop_reason"] == k for a in at)
                         for k in sorted({a["stop_reason"] for a in at})}}
    a95 = summary["autotune"]["trials_95"]["median"]
    targets = {
        "quarter_of_grid": {"limit": launchable / 4, "value": a95, "met": a95 <= launchable / 4},
        "half_of_random": {"limit": summary["random"]["trials_95"]["median"] / 2, "value": a95,
                           "met": a95 <= summary["random"]["trials_95"]["median"] / 2}}
    missing = land.missing()
    out = {"landscape": land.data.get("fingerprint"), "synthetic": bool(land.data.get("synthetic")),
           "workload": land.data.get("workload"), "grid_size": len(grid),
           "launchable": launchable, "missing_rows": missing, "seeds": seeds,
           "max_accuracy_drop": max_drop, "budget_s": budget_s,
           "patience": patience or SearchOptions.__dataclass_fields__["patience"].default,
           "warm_start": warm_start, "startup_draws": startup_draws,
           "guide": guide or SearchOptions.__dataclass_fields__["guide"].default,
           "sampler": sampler, "early_stop": early_stop, "oracle": {"throughput": oracle,
                                                     "config": where["config"] if where else None},
           "summary": summary, "targets": targets, "runs": runs,
           "replay_seconds": round(time.perf_counter() - started, 1)}
    out["verdict"] = _verdict(out)
    return out


def default_landscape() -> Path:
    from autotune.probe import probe
    here = probe(collect_capabilities=False).fingerprint()
    mine = DATA / f"landscape-{here}.json"
    if mine.exists():
        return mine
    # Another machine's landscape is never replayed as this one's: name it only with --landscape.
    others = ", ".join(p.name for p in sorted(DATA.glob("landscape-*.json"))) or "none"
    raise SystemExit(f"no landscape of this machine ({mine.name}) in {DATA}; other machines': "
                     f"{others} (replay one with --landscape PATH); record this one with "
                     "`python3 -m benchmarks.landscapes.record` (about 40 minutes) or use "
                     "--synthetic formula")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.replay.efficiency", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--landscape", help="recorded landscape JSON (default: this machine's)")
    src.add_argument("--synthetic", choices=("formula", "random"))
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--max-accuracy-drop", type=float, default=1.0)
    p.add_argument("--patience", type=int, help="stopping rule of phase 1 (default: the search's)")
    p.add_argument("--startup-draws", type=int, metavar="N",
                   help="variant: TPE start-up trials drawn from launchable configurations "
                        "(default: the search's 6; 0: TPE's own uniform draws)")
    p.add_argument("--warm-start", action="store_true",
                   help="variant: enqueue hardware-informed bets after the references")
    p.add_argument("--budget", type=float, default=1800.0, help="phase-1 budget, seconds (1800)")
    p.add_argument("--out", default=str(RESULTS / "search_efficiency.json"))
    args = p.parse_args(argv)
    land = synthetic(args.synthetic) if args.synthetic else \
        Landscape.load(args.landscape or default_landscape())
    out = compare(land, seeds=args.seeds, max_drop=args.max_accuracy_drop,
                  patience=args.patience, budget_s=args.budget, warm_start=args.warm_start,
                  startup_draws=args.startup_draws)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(_finite(out), indent=1))
    print(table(out))
    print(f"wrote {args.out}")
    return 0


def _finite(v: Any) -> Any:
    """JSON has no infinity: 'never reached' is written as null."""
    if isinstance(v, float) and v == INF:
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_finite(x) for x in v]
    return v


if __name__ == "__main__":
    sys.exit(main())
