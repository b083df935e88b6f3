"""How fast each search strategy finds the best configuration of a recorded landscape.

    python3 -m benchmarks.search_efficiency                     # this machine's landscape
    python3 -m benchmarks.search_efficiency --landscape FILE --seeds 20
    python3 -m benchmarks.search_efficiency --synthetic random  # a made-up landscape

Replays the table (benchmarks/landscape.py) instead of running trials, so a whole search takes
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
import dataclasses
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import optuna

from autotune import result as R
from autotune.result import Outcome
from autotune.search.budget import plan_budget
from autotune.config import Config
from autotune.progress import Silent
from autotune.measure.early_stop import StopRule, losing
from autotune.search.loop import run_search
from autotune.plan.feasible import ruled_out
from autotune.search.options import SearchOptions
from autotune.search.references import make_sampler
from autotune.study.storage import open_study

from .landscape import DATA, Landscape, SimClock, math_key, synthetic

RESULTS = Path(__file__).resolve().parent / "results"
LEVELS = (0.95, 0.99)
INF = float("inf")


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


def warm_start_params(space, topology) -> list[dict[str, Any]]:
    """A candidate hardware-informed warm start, tried right after the references (opt-in with
    --warm-start; NOT in autotune/search/loop.py, because on the synthetic landscapes it did not reach
    95% sooner and made the stagnation rule stop earlier). The bets: all cores in one rank doing
    native bf16 (avx512_bf16/AMX), and one rank per core; both with the best allocator and pinning
    found. Enqueued before run_search, the sampler's first asks return them."""
    knobs = space.knobs
    first = {k: v[0] for k, v in knobs.items()}

    def pick(knob: str, *prefer: Any) -> Any:
        return next((p for p in prefer if p in knobs.get(knob, ())), first.get(knob))

    common = {**first, "allocator": pick("allocator", "tcmalloc", "jemalloc"),
              "binding": pick("binding", "numactl", "taskset"),
              "precision": pick("precision", "bf16" if topology.isa.bf16 else "fp32")}
    per_node = space.topology_names.get("cores_per_node", 1)
    usable = space.topology_names.get("usable_cores", 1)
    bets = [{**common, "ranks_per_numa_node": pick("ranks_per_numa_node", 1), "threads": pick("threads", usable)},
            {**common, "ranks_per_numa_node": pick("ranks_per_numa_node", per_node), "threads": pick("threads", 1)}]
    out = []
    for params in bets:
        params = {k: v for k, v in params.items() if k in knobs}
        if params not in out and not space.violations(params):
            out.append(params)
    return out


def early_stopping(land: Landscape, clock: SimClock, seed: int,
                   rule: StopRule = StopRule(), windows: int = 5, window_cv: float = 0.03):
    """The landscape's evaluator with losing trials ended early (autotune.measure.early_stop):
    the timed window is `windows` windows whose throughputs scatter by `window_cv` around the
    recorded one (the recorded landscape's median step CV is 8%, over ~20 steps a window); a trial
    stopped after k windows costs (windows - k) / windows of its timed window less, and returns
    the mean of its k windows with the decision as `stopped_early`, as the worker does. The leader
    is the one the search gives each sampled trial (`leader=`: SearchOptions.early_stop), as in a
    real search; the references get none and run whole."""
    base = land.evaluator(clock)
    rng = random.Random(seed)
    window_s = float(land.data.get("target_seconds") or 5.0) * land.data.get("trial_scale", 1.0)

    def evaluate(config: Config, mode: str, *, leader: float | None = None,
                 **kw: Any) -> R.TrialResult:
        ev = base(config, mode, **kw)
        if mode != "throughput" or ev.outcome != Outcome.OK or not ev.throughput or not leader:
            return ev
        seen: list[float] = []
        for _ in range(windows):
            seen.append(ev.throughput * (1 + rng.gauss(0.0, window_cv)))
            decision = losing(seen, leader, rule)
            if decision.stop:
                saved = (windows - len(seen)) / windows * window_s
                clock.t -= saved
                return dataclasses.replace(ev, throughput=statistics.fmean(seen),
                                           seconds=ev.seconds - saved,
                                           stopped_early=decision.reason)
        return ev
    return evaluate


class _Reached(Exception):
    pass


def run_autotune(land: Landscape, seed: int, oracle: float, max_drop: float,
                 budget_s: float = 1800.0, patience: int | None = None,
                 warm_start: bool = False, startup_draws: int | None = None,
                 guide: str | None = None, sampler: str = "tpe",
                 early_stop: bool = False) -> dict[str, Any]:
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
                       options=SearchOptions(budget_s=1e12, min_trial_s=0.0, patience=10**9,
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
            early_stop: bool = False) -> dict[str, Any]:
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
                                             early_stop))
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


def _summarise(rs: list[dict[str, Any]]) -> dict[str, Any]:
    s: dict[str, Any] = {}
    for level in LEVELS:
        for what in ("trials", "seconds"):
            vals = [r[f"{what}_{_pct(level)}"] for r in rs]
            s[f"{what}_{_pct(level)}"] = {"median": statistics.median(vals),
                                          "q1": _q(vals, 0.25), "q3": _q(vals, 0.75),
                                          "never": sum(v == INF for v in vals)}
    return s


def _q(vals: list[float], q: float) -> float:
    xs = sorted(vals)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def _pct(level: float) -> str:
    return str(round(level * 100))


def _verdict(out: dict[str, Any]) -> str:
    t, s = out["targets"], out["summary"]["autotune"]
    stop = s["at_default_stop"]
    parts = [f"autotune reaches 95% of the oracle in a median {s['trials_95']['median']:g} trials "
             f"(target <= {t['quarter_of_grid']['limit']:g}, a quarter of the grid: "
             f"{'met' if t['quarter_of_grid']['met'] else 'MISSED'}; <= "
             f"{t['half_of_random']['limit']:g}, half of random search: "
             f"{'met' if t['half_of_random']['met'] else 'MISSED'})",
             f"with its default stopping rules (30-minute budget) it stops after a median "
             f"{stop['median_launched']:g} trials at {stop['median_best_fraction']:.1%} of the "
             f"oracle (worst seed {stop['min_best_fraction']:.1%}; {stop['share_at_97pct']:.0%} "
             f"of seeds at >= 97%)"]
    if out["synthetic"]:
        parts.append("SYNTHETIC landscape: says the machinery works, not how a real machine behaves")
    if out["missing_rows"]:
        parts.append(f"PARTIAL landscape: {out['missing_rows']} grid configs not recorded "
                     "(replayed as unavailable at no cost)")
    return "; ".join(parts)


def table(out: dict[str, Any]) -> str:
    def fmt(v: float) -> str:
        return "never" if v == INF else f"{v:.0f}"
    lines = [f"landscape {out['landscape']}: {out['launchable']} launchable of {out['grid_size']} "
             f"grid configs, oracle {out['oracle']['throughput']:.1f} samples/s, "
             f"{out['seeds']} seeds, replayed in {out['replay_seconds']}s",
             f"{'strategy':<10}{'trials@95%':>12}{'trials@99%':>12}{'sim s@95%':>12}{'sim s@99%':>12}"]
    for name in ("autotune", "random", "grid"):
        s = out["summary"][name]
        lines.append(f"{name:<10}" + "".join(f"{fmt(s[k]['median']):>12}" for k in
                                             ("trials_95", "trials_99", "seconds_95", "seconds_99")))
    lines.append("(medians over seeds; grid order is deterministic)")
    lines.append(out["verdict"])
    return "\n".join(lines)


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
                     "`python3 -m benchmarks.landscape --record` (about 40 minutes) or use "
                     "--synthetic formula")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.search_efficiency", description=__doc__,
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
