"""How long a timed window must be: the spread of a verification round's ratio, and what a round
costs, at window lengths of 1 to 5 s, side by side in one run (issue 62).

    python3 -m benchmarks.timed.window_length --rounds 12            # ~6 minutes on 2 cores

A search times each trial and each verification window for `search/budget.plan_budget`'s window
(2 s under 20 minutes, 5 s beyond; 3 s from 5 to 20 minutes before this measurement). A round of verification is two windows, the
default launch and the candidate, each a window of its launch kept running (run/warm.py), and
its ratio is what verification settles (95% interval within ±10%): the rounds needed grow with
the square of the ratio's spread, and each costs its two windows plus their fixed part (the
warm-up steps, the request's round trip). Two launches are kept running, the default and
`--candidate` (the 5-minute search's recommendation by default), and every round runs both at
every length, the lengths' order rotated and the pair's order alternated (D C, C D), so a drift
of the machine falls on every length alike.

Per length: the median ratio, the standard deviation of the per-round log ratio, each side's
window-to-window spread (coefficient of variation), the round's wall seconds, the share of N
rounds drawn from the measured ones that the tool's own verdict settles (N = 3, 4, 5, 6, 8, 12),
and the seconds a verification would take to settle from them.

Results, with the machine: benchmarks/results/window_length_<cpu>_<date>.json.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from autotune.config import Config, parse_sets
from autotune.errors import ConfigError
from benchmarks import RESULTS, out_folder_problem
from benchmarks.timed.machine import describe as describe_machine

LENGTHS = (1.0, 2.0, 3.0, 5.0)
CANDIDATE = ("ranks_per_numa_node=1", "binding=numactl", "allocator=tcmalloc", "precision=bf16",
             "compile=True")
DRAWN = (3, 4, 5, 6, 8, 12)   # rounds drawn: the asked 3, then as verification adds them


def measure(topology, config_d: Config, config_c: Config, lengths: Sequence[float], rounds: int,
            results: str, workload: str) -> list[dict[str, Any]]:
    """Every round: both launches at every length, a window each. One row per window."""
    from autotune.run.trial import TrialSettings, run_trial
    from autotune.run.warm import WarmLaunches
    base = TrialSettings(target_seconds=lengths[0], timeout_s=300.0, results_dir=results,
                         workload=workload)
    warm, rows = WarmLaunches(), []
    try:
        for config in (config_d, config_c):             # each launch's first window (its start)
            run_trial(config, topology, base, warm=warm)
        for r in range(rounds):
            order = list(lengths[r % len(lengths):]) + list(lengths[:r % len(lengths)])
            for length in order:
                sides = (("D", config_d), ("C", config_c)) if r % 2 == 0 else \
                    (("C", config_c), ("D", config_d))
                for side, config in sides:
                    t0 = time.monotonic()
                    out = run_trial(config, topology, replace(base, target_seconds=length),
                                    warm=warm)
                    rows.append({"round": r, "length": length, "side": side,
                                 "throughput": out.throughput, "window_s": out.window_s,
                                 "wall_s": round(time.monotonic() - t0, 3),
                                 "outcome": out.outcome.value})
            print(f"round {r + 1}/{rounds}: " + ", ".join(
                f"{x['length']:g}s {x['side']} {x['throughput'] or 0:.0f}/s"
                for x in rows[-2 * len(lengths):]), flush=True)
    finally:
        warm.close()
    return rows


def summarize(rows: Sequence[dict[str, Any]], draws: int = 2000) -> dict[str, Any]:
    """Per length, from the rounds whose two windows both measured: the ratio and its spread,
    each side's, a round's wall seconds, and how often N rounds drawn from them (with
    replacement, seeded) settle through the tool's own verdict (recommend/settle.py)."""
    per: dict[float, dict[int, dict[str, float]]] = {}
    for x in rows:
        if x.get("outcome") == "ok" and x.get("throughput"):
            at = per.setdefault(x["length"], {}).setdefault(x["round"], {"wall": 0.0})
            at[x["side"]] = x["throughput"]
            at["wall"] += x["wall_s"]
    out: dict[str, Any] = {}
    for length, rounds in sorted(per.items()):
        whole = [v for v in rounds.values() if "D" in v and "C" in v]
        if len(whole) < 3:
            out[f"{length:g}"] = {"rounds": len(whole)}
            continue
        ratios = [v["C"] / v["D"] for v in whole]
        round_s = statistics.median(v["wall"] for v in whole)
        settled = {n: _settled_share(ratios, n, draws) for n in DRAWN}
        expected = round(_expected_rounds(settled), 2)
        out[f"{length:g}"] = {
            "rounds": len(whole), "ratio": round(statistics.median(ratios), 3),
            "log_ratio_sd": round(statistics.stdev(math.log(r) for r in ratios), 4),
            "cv_default": round(_cv([v["D"] for v in whole]), 4),
            "cv_candidate": round(_cv([v["C"] for v in whole]), 4),
            "round_s": round(round_s, 2), "settled_share": settled,
            "expected_rounds": expected, "seconds_to_settle": round(expected * round_s, 2)}
    return out


def _settled_share(ratios: Sequence[float], n: int, draws: int) -> float:
    from autotune.recommend.settle import settle
    rng = random.Random(n)
    hits = 0
    for _ in range(draws):
        got = settle([rng.choice(ratios) for _ in range(n)], [None] * n)
        hits += bool(got and got.settled)
    return round(hits / draws, 3)


def _expected_rounds(settled: dict[int, float]) -> float:
    """Rounds a verification runs until settled, were each count's share independent of the
    last: 3 asked, then one more at a time (the last count's rounds when none settles)."""
    expected, unsettled_before = 0.0, 1.0
    counts = sorted(settled)
    for i, n in enumerate(counts):
        reach = unsettled_before
        share = 1.0 if i == len(counts) - 1 else settled[n]
        expected += reach * share * n
        unsettled_before = reach * (1 - share)
    return expected


def _cv(values: Sequence[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values)


def describe(summary: dict[str, Any]) -> list[str]:
    """One line per length, as the docs quote it."""
    lines = []
    for length, v in summary.items():
        if "log_ratio_sd" not in v:
            lines.append(f"{length} s: {v['rounds']} whole round(s), too few to say")
            continue
        shares = ", ".join(f"{n}: {100 * s:.0f}%" for n, s in v["settled_share"].items())
        lines.append(
            f"{length} s: ratio {v['ratio']:.3f}x, round-to-round spread "
            f"{100 * v['log_ratio_sd']:.1f}% (windows D {100 * v['cv_default']:.1f}%, "
            f"C {100 * v['cv_candidate']:.1f}%), a round {v['round_s']:.1f} s; settled after "
            f"N rounds ({shares}), about {v['seconds_to_settle']:.0f} s to settle; "
            f"{v['rounds']} rounds")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=12, help="rounds, each every length (>= 3)")
    p.add_argument("--lengths", type=float, nargs="+", default=list(LENGTHS),
                   help="window lengths in seconds (default: 1 2 3 5)")
    p.add_argument("--candidate", nargs="+", default=list(CANDIDATE), metavar="KNOB=VALUE",
                   help="the candidate launch beside the default (default: the 5-minute "
                   "search's recommendation on the 2-core EPYC)")
    p.add_argument("--workload", default="cnn")
    p.add_argument("--out", default=str(RESULTS), help="folder for the JSON (benchmarks/results)")
    args = p.parse_args(argv)
    if (why := out_folder_problem(args.out)) is not None:
        print(f"window_length: error: {why}", file=sys.stderr)
        return 2
    if args.rounds < 3 or any(not 0 < x <= 30 for x in args.lengths):
        print("window_length: error: --rounds must be at least 3 and each length within "
              "(0, 30] s", file=sys.stderr)
        return 2
    try:
        candidate = parse_sets(args.candidate)
    except ConfigError as exc:
        print(f"window_length: error: --candidate: {exc}", file=sys.stderr)
        return 2
    from autotune.probe import probe
    machine = describe_machine(fingerprint=True)
    t0 = time.time()
    rows = measure(probe(None), Config(), candidate, args.lengths, args.rounds,
                   "autotune-results-bench", args.workload)
    summary = summarize(rows)
    out = {"machine": machine, "command": "python3 -m benchmarks.timed.window_length " +
           " ".join(argv if argv is not None else sys.argv[1:]), "candidate": args.candidate,
           "seconds": round(time.time() - t0, 1), "summary": summary, "rows": rows}
    tag = f"{machine.get('cpu family', 'x')}-{machine.get('model', 'x')}"
    path = Path(args.out) / f"window_length_family{tag}_{time.strftime('%Y-%m-%d')}.json"
    path.write_text(json.dumps(out, indent=1))
    print("\n".join(describe(summary)))
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
