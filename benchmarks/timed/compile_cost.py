"""torch.compile against eager, and what compiling costs cold and warm, per built-in workload
(issue 59), in real trials of autotune's worker, rounds interleaved.

    python3 -m benchmarks.timed.compile_cost --rounds 3 --seconds 6
    python3 -m benchmarks.timed.compile_cost --workloads mlp --rounds 1 --seconds 0.3   # a check

Each round, per workload, three fresh launches of one configuration (--set, default: the
default launch), each its own process, as a user's runs are:
  eager   compile=false
  cold    compile=true into an empty private compile cache (util/compile_cache.py): inductor
          compiles every graph
  warm    compile=true again, the same cache: the graphs come from inductor's on-disk cache
          (a new process: nothing in memory), what a user's first run after a search pays
Cold must precede warm, so eager goes first in one round and last in the next: drift falls on
both sides.

Printed per workload: compiled / eager throughput per round (autotune.measure.stats.ratio_stats
on the warm and the cold launch), and the compile seconds cold and warm (measure/compile_cost.py:
the compiled warm-up steps less the steady step). Written to benchmarks/results/compile_cost.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from typing import Any

from autotune.config import BUILTIN_WORKLOADS, Config, parse_sets
from autotune.measure.stats import ratio_stats
from autotune.probe import probe
from autotune.run.trial import TrialSettings, run_trial

from benchmarks import RESULTS


def one_round(topology, workload: str, base: Config, seconds: float, eager_first: bool,
              results: str) -> dict[str, dict[str, Any]]:
    """One round's three launches of `workload`: {arm: its row}."""
    settings = TrialSettings(workload=workload, target_seconds=seconds, timeout_s=1800.0,
                             results_dir=results)
    cache = tempfile.mkdtemp(prefix="compile-cost-")   # empty: the cold launch compiles all
    arms = ["eager", "cold", "warm"] if eager_first else ["cold", "warm", "eager"]
    out: dict[str, dict[str, Any]] = {}
    before = os.environ.get("AUTOTUNE_CACHE")
    os.environ["AUTOTUNE_CACHE"] = cache   # the plan gives the ranks <cache>/compile/...
    try:
        for arm in arms:
            res = run_trial(base.with_(compile=arm != "eager"), topology, settings)
            out[arm] = {"outcome": str(res.outcome), "reason": res.reason,
                        "throughput": res.throughput, "compile_s": res.compile_s,
                        "compile_cache": res.compile_cache, "recompiles": res.recompiles,
                        "seconds": round(res.seconds, 1)}
            print(f"  {workload} {arm}: {res.outcome} {res.throughput or 0:.1f} samples/s, "
                  f"compile {res.compile_s} s ({res.compile_cache})", file=sys.stderr, flush=True)
    finally:
        if before is None:
            os.environ.pop("AUTOTUNE_CACHE", None)
        else:
            os.environ["AUTOTUNE_CACHE"] = before
    return out


def summarize(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Per workload, from its rounds: compiled / eager per round (warm and cold launches) and
    the median compile seconds cold and warm. Rounds with a failed arm are left out, counted."""
    whole = [r for r in rounds if all(r[a]["outcome"] == "ok" and r[a]["throughput"]
                                      for a in ("eager", "cold", "warm"))]
    out: dict[str, Any] = {"rounds": len(rounds), "failed_rounds": len(rounds) - len(whole)}
    if not whole:
        return out
    eager = [r["eager"]["throughput"] for r in whole]
    for arm in ("warm", "cold"):
        ratio = ratio_stats([r[arm]["throughput"] for r in whole], eager)
        out[f"{arm}_over_eager"] = {"median": round(ratio.median, 3),
                                    "spread": round(ratio.spread, 3),
                                    "ratios": [round(x, 3) for x in ratio.ratios]}
        costs = [r[arm]["compile_s"] for r in whole if r[arm]["compile_s"] is not None]
        out[f"{arm}_compile_s"] = round(statistics.median(costs), 2) if costs else None
    out["recompiles"] = max(r[a]["recompiles"] or 0 for r in whole for a in ("cold", "warm"))
    return out


def describe(workload: str, s: dict[str, Any]) -> str:
    if "warm_over_eager" not in s:
        return f"{workload}: no whole round ({s['failed_rounds']} of {s['rounds']} failed)"
    w, c = s["warm_over_eager"], s["cold_over_eager"]
    return (f"{workload}: compiled {w['median']:.2f}x eager (±{w['spread']:.2f}; cold launch "
            f"{c['median']:.2f}x), compiling {s['cold_compile_s']} s cold, "
            f"{s['warm_compile_s']} s warm, {s['recompiles']} recompile(s), {s['rounds']} rounds")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.timed.compile_cost",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", nargs="+", default=list(BUILTIN_WORKLOADS),
                   choices=BUILTIN_WORKLOADS)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=6.0, help="each timed window")
    p.add_argument("--set", action="append", default=[], dest="sets", metavar="KNOB=VALUE",
                   help="the configuration both sides share (default: the default launch)")
    p.add_argument("--out", default=str(RESULTS / "compile_cost.json"))
    args = p.parse_args(argv)
    base = parse_sets(args.sets)
    topology = probe(None)
    if topology.capabilities.compile_problem:
        raise SystemExit(f"this machine cannot compile: {topology.capabilities.compile_problem}")
    results = tempfile.mkdtemp(prefix="compile-cost-trials-")
    rows: dict[str, list] = {w: [] for w in args.workloads}
    for n in range(args.rounds):
        for workload in args.workloads:
            rows[workload].append(one_round(topology, workload, base, args.seconds,
                                            eager_first=n % 2 == 0, results=results))
    summary = {w: summarize(r) for w, r in rows.items()}
    for w, s in summary.items():
        print(describe(w, s))
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"config": base.to_dict(), "seconds": args.seconds, "rounds": rows,
                   "summary": summary, "torch": topology.capabilities.torch_version}, f, indent=1)
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
