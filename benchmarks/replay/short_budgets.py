"""What 5-, 10- and 30-minute searches find, and how much of their budget they use, by replay
(issue 62). SIMULATED: no trial runs; the figures are the tables' and the model's.

    python3 -m benchmarks.replay.short_budgets --seeds 5
    python3 -m benchmarks.replay.short_budgets --seeds 3 --budgets 300 600 --machines epyc-7763-nps4
    PYTHONPATH=/path/to/another/checkout python3 benchmarks/replay/short_budgets.py --tag before

The whole pipeline (`autotune.tune.search`: references, sampler, quality, the budget's reserve,
verification, the stored recommendation) replays each landscape on a simulated clock, at each
budget, over seeds. The tables record every trial as a fresh start; a real search keeps launches
running between runs (run/warm.py), so this replay does too: the MAX_OPEN most recently used
launches (config.launch_part) are kept, and a run of one of them costs WINDOW_SHARE of its
recorded length (a window of 3.3 s against a start of ~8 s on the quiet 2-core EPYC,
2026-11-29, issue 62) and is marked as a window, as the live evaluator marks it; the evaluator
answers `running(config)` as the live one does. Reported per landscape and budget, median over
seeds: trials launched, trials until the search had measured 95% of the table's best within the
accuracy gate (inf: not within the budget), the verified recommendation's share of that best,
and the budget left unused (or overrun). The command runs under whatever `autotune` is on the
path, so the same file measures another checkout (before/after).
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autotune.config import Config, launch_part
from autotune.progress import Silent
from autotune.run.warm import MAX_OPEN
from autotune.result import Outcome, TrialResult
from autotune.tune import SearchRequest, search

from benchmarks import RESULTS
from benchmarks.landscapes.synthetic import synthetic
from benchmarks.landscapes.table import DATA, Landscape, SimClock

# A window's share of a start's cost: 3.3 s against ~8 s on the quiet 2-core EPYC (issue 62).
WINDOW_SHARE = 3.3 / 8.0
BUDGETS = (300.0, 600.0, 1800.0)
RECORDED = DATA / "landscape-115e441fefef.json"   # the Zen 5 machine's (2 cores, 2026-11-24)


class KeptLaunches:
    """An Evaluate over a landscape's table whose runs of a launch kept running cost a window."""

    def __init__(self, land: Landscape, clock: SimClock) -> None:
        self.land, self.table, self.clock = land, land.evaluator(clock), clock
        self.open: collections.OrderedDict[str, None] = collections.OrderedDict()

    def running(self, config: Config) -> bool:
        return launch_part(config).key() in self.open

    def __call__(self, config: Config, mode: str, **kw: Any) -> TrialResult:
        key, before = launch_part(config).key(), self.clock.t
        out = self.table(config, mode, **{k: v for k, v in kw.items()
                                           if k in ("seed", "samples", "leader")})
        if out.outcome == Outcome.UNAVAILABLE or not out.seconds:
            return out
        if key in self.open:   # a window: the start it did not pay is given back to the clock
            row = self.land.rows.get(config.key()) or {}
            start_s = (1.0 - WINDOW_SHARE) * float(row.get("seconds") or 0.0)
            seconds = out.seconds * WINDOW_SHARE if mode == "throughput" else \
                max(out.seconds - start_s, 0.5 * out.seconds)
            self.clock.t = before + seconds
            out = dataclasses.replace(out, seconds=seconds, fixed={"wait": 0.0, "model": 0.0})
        self.open.pop(key, None)
        if out.outcome == Outcome.OK:
            self.open[key] = None
            while len(self.open) > MAX_OPEN:
                self.open.popitem(last=False)
        return out


class Traced(Silent):
    """Counts the search's trials and when the best within the gate reached 95% of the best."""

    def __init__(self, land: Landscape, oracle: float, max_drop: float) -> None:
        self.land, self.oracle, self.max_drop = land, oracle, max_drop
        self.trials, self.best, self.at95 = 0, 0.0, math.inf

    def trial_end(self, *, record, seconds: float) -> None:
        if record.outcome == Outcome.INFEASIBLE:
            return
        self.trials += 1
        if record.outcome == Outcome.OK and record.throughput \
                and self.land.feasible_within(record.config, self.max_drop):
            self.best = max(self.best, record.throughput)
        if self.at95 == math.inf and self.best >= 0.95 * self.oracle:
            self.at95 = self.trials


def replay(land: Landscape, budget_s: float, seed: int, max_drop: float = 1.0) -> dict[str, Any]:
    oracle, _ = land.oracle(max_drop)
    clock = SimClock()
    trace = Traced(land, oracle, max_drop)
    with tempfile.TemporaryDirectory() as results:
        tempfile.tempdir = results   # the machine lock: away from real searches
        try:
            tuned = search(SearchRequest(budget_s=budget_s, results=results, seed=seed,
                                         max_accuracy_drop=max_drop),
                           label="cnn", topology=land.topology(), evaluate=KeptLaunches(
                               land, clock), clock=clock, progress=trace)
        finally:
            tempfile.tempdir = None
    rec = tuned.recommendation
    verified = rec.throughput / oracle if rec is not None and rec.verified and rec.throughput \
        else 0.0
    return {"seed": seed, "trials": trace.trials, "trials_95": trace.at95,
            "verified_share": round(verified, 3), "stop": tuned.summary["stop_reason"],
            "unused_s": round(budget_s - clock.t, 1)}


def landscapes(names: list[str]) -> dict[str, Landscape]:
    out = {"recorded-2core": Landscape.load(RECORDED), "synthetic": synthetic("formula", seed=0)}
    if names:
        from benchmarks.landscapes.model_machines import machines, model_landscape
        for name in names:
            topology, hw = machines()[name]
            out[name] = model_landscape(name, topology, hw)
    return out


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    med = statistics.median
    return {"trials": med(r["trials"] for r in runs),
            "trials_95": med(r["trials_95"] for r in runs),
            "reached_95": sum(r["trials_95"] != math.inf for r in runs),
            "verified_share": med(r["verified_share"] for r in runs),
            "unused_s": med(r["unused_s"] for r in runs),
            "most_unused_s": max(r["unused_s"] for r in runs),
            "most_over_s": max(0.0, -min(r["unused_s"] for r in runs)), "seeds": len(runs)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--budgets", type=float, nargs="+", default=list(BUDGETS))
    p.add_argument("--machines", nargs="*", default=[],
                   help="simulated machines of benchmarks/landscapes/model_machines.py too")
    p.add_argument("--tag", default="after", help="names the results file (before/after)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    rows, started = [], time.perf_counter()
    for name, land in landscapes(args.machines).items():
        for budget in args.budgets:
            runs = [replay(land, budget, seed) for seed in range(args.seeds)]
            row = {"landscape": name, "budget_s": budget, **summary(runs), "runs": runs}
            rows.append(row)
            print(f"{name:>16} {budget / 60:>4.0f}m  trials {row['trials']:>5}  to 95% "
                  f"{row['trials_95']:>5} ({row['reached_95']}/{args.seeds})  verified "
                  f"{row['verified_share']:.0%} of the best  unused {row['unused_s']:.0f} s "
                  f"(most {row['most_unused_s']:.0f} s, over by {row['most_over_s']:.0f} s)",
                  flush=True)
    out = Path(args.out or RESULTS / f"short_budgets_{args.tag}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"window_share": WINDOW_SHARE, "seeds": args.seeds,
                               "rows": rows, "replay_s": round(time.perf_counter() - started)},
                              indent=1, default=str))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
