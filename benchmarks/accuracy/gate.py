"""The accuracy gate's operating characteristics, measured: how often is a class that truly loses
2 pp or more accepted, and how often is a class that truly loses nothing shown within 1 pp?

The runs are real quality runs of autotune's worker (benchmarks/accuracy/gate_runs.py): per workload and
quality length, K seeds of the default's math, of bf16 (truly loses nothing), and of the default's
math trained with a share of its labels replaced at random (truly loses; how much, its K seeds
measure). Every run keeps its held-out outcomes example by example, so the same runs are judged
offline by:

  paired t   the gate (quality/gate.paired): the per-seed drops' one-sided 95% upper bound
  mcnemar    per-example agreement pooled over the pairs' held-out examples: the drop's bound
             from the discordant examples alone, as if examples, not seeds, were the unit

at the search's 3 paired seeds and at a confirmation's 6, on the first 2048 held-out examples
(the built-in workloads' evaluation) and on all 16384. A "trial" of the gate is every subset of
n seeds out of the K (C(K, n) of them: overlapping, so the rates are estimates from K seeds, not
from C(K, n) independent trials; the table says K). Coverage is how often a bound is at or above
the class's drop over all K seeds on every example. Both, and the "what_if" columns, take the
truth from the very seeds the subsets are drawn from: circular, so a correct 95% bound reads
~99.5% here. They describe these runs; the procedure's operating characteristics (selection,
looks, several candidates, spikes, failures) are benchmarks/accuracy/procedure.py's.

    python3 -m benchmarks.accuracy.gate --run --workload cnn --seeds 8     # the runs (resumable)
    python3 -m benchmarks.accuracy.gate                                    # the table, stored
    python3 -m benchmarks.accuracy.gate --old                              # round 3's 60 seeds
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import statistics
import sys
from typing import Any

from autotune.quality import gate as G
from benchmarks.workloads.gate_probe import unpack

RUNS = "benchmarks/results/accuracy_gate_paired_runs.jsonl"
OUT = "benchmarks/results/accuracy_gate_paired.json"
OLD_RUNS = "benchmarks/results/accuracy_gate_runs.jsonl"   # round 3: 2048 examples, no bits
EVAL_SIZES = (2048, 16384)
PAIRS = (3, 6)
TOLERANCE = 1.0
# Each workload's and length's share of relabelled training labels, chosen from one or two seeds
# so that the class loses a few points (the cnn: 5% lost 3.3 pp at 8192 samples on seed 0, 0.5 pp
# at 16384); what it truly loses is what its K seeds measure.
LABEL_NOISE = {"cnn": {8192: 0.05, 16384: 0.20}, "transformer": {8192: 0.10, 16384: 0.10}}
# What the search sizes a quality run to, per budget, on the 2-core machine (quality/sizing.py
# at the quickest default-math launch, 1204 samples/s): 5 minutes 8192, 10 and 30 minutes 16384.
LENGTH_OF_BUDGET = {"5m": 8192, "10m": 16384, "30m": 16384}
# Sets of per-seed drops the normal model draws per what-if: 20000 puts a rate's standard error
# below 0.4 pp; nearly all of the table's time.
NORMAL_DRAWS = 20000


def outcomes(row: dict[str, Any], n: int) -> list[bool]:
    return unpack(row["held_out"])[:n]


def tables(rows: list[dict[str, Any]], draws: int = NORMAL_DRAWS) -> dict[str, Any]:
    """Per (workload, length): each arm against the default, per eval size and number of pairs;
    `draws`: sets of drops the normal model of each what-if draws."""
    ok = [r for r in rows if r.get("outcome") == "ok" and r.get("held_out")]
    groups: dict[tuple[str, int], dict[str, dict[int, dict[str, Any]]]] = {}
    for r in ok:
        arm = r["arm"] if r["arm"] != "noisy" else f"noisy{r['label_noise']:g}"
        groups.setdefault((r["workload"], r["samples"]), {}).setdefault(arm, {})[r["seed"]] = r
    out = {}
    for (workload, samples), arms in sorted(groups.items()):
        default = arms.get("default", {})
        entry: dict[str, Any] = {"workload": workload, "samples": samples, "arms": {}}
        for arm, by_seed in sorted(arms.items()):
            if arm == "default":
                continue
            seeds = sorted(set(by_seed) & set(default))
            if len(seeds) < 3:
                continue
            entry["arms"][arm] = judge_arm(default, by_seed, seeds, draws)
        out[f"{workload}@{samples}"] = entry
    return out


def judge_arm(default: dict[int, dict], arm: dict[int, dict], seeds: list[int],
              draws: int = NORMAL_DRAWS) -> dict[str, Any]:
    full = EVAL_SIZES[-1]
    d_full = {s: _acc(outcomes(default[s], full)) for s in seeds}
    c_full = {s: _acc(outcomes(arm[s], full)) for s in seeds}
    truth = G.paired(d_full, c_full, TOLERANCE)
    res: dict[str, Any] = {"K": len(seeds), "true_drop_pp": round(truth.drop_pp, 3),
                           "true_drop_se_pp": round(truth.se_pp, 3),
                           "correlation": _r(truth.correlation),
                           "paired_sd_pp": round(truth.se_pp * math.sqrt(truth.n), 3),
                           "by_eval": {}}
    for n_eval in EVAL_SIZES:
        d = {s: outcomes(default[s], n_eval) for s in seeds}
        c = {s: outcomes(arm[s], n_eval) for s in seeds}
        da = {s: _acc(v) for s, v in d.items()}
        ca = {s: _acc(v) for s, v in c.items()}
        whole = G.paired(da, ca, TOLERANCE)
        per: dict[str, Any] = {"paired_sd_pp": round(whole.se_pp * math.sqrt(whole.n), 3),
                               "unpaired_se_over_paired": _r(whole.se_unpaired_pp / whole.se_pp
                                                             if whole.se_pp else None),
                               "correlation": _r(whole.correlation)}
        for n in PAIRS:
            if n > len(seeds):
                continue
            subsets = list(itertools.combinations(seeds, n))
            answers, covered, mc_within, mc_covered = [], 0, 0, 0
            for sub in subsets:
                b = G.paired({s: da[s] for s in sub}, {s: ca[s] for s in sub}, TOLERANCE)
                answers.append(b.answer)
                covered += b.upper_pp >= truth.drop_pp
                upper = mcnemar_upper([d[s] for s in sub], [c[s] for s in sub])
                mc_within += upper <= TOLERANCE
                mc_covered += upper >= truth.drop_pp
            k = len(subsets)
            per[f"n{n}"] = {"subsets": k,
                            "within": round(answers.count(G.Shown.WITHIN) / k, 3),
                            "not_shown": round(answers.count(G.Shown.NOT_SHOWN) / k, 3),
                            "beyond": round(answers.count(G.Shown.BEYOND) / k, 3),
                            "coverage": round(covered / k, 3),
                            "mcnemar_within": round(mc_within / k, 3),
                            "mcnemar_coverage": round(mc_covered / k, 3)}
        res["by_eval"][str(n_eval)] = per
    drops = list(G.paired({s: _acc(outcomes(default[s], EVAL_SIZES[0])) for s in seeds},
                          {s: _acc(outcomes(arm[s], EVAL_SIZES[0])) for s in seeds},
                          TOLERANCE).drops_pp)
    sd = statistics.stdev(drops)
    res["what_if"] = {f"true {t:+.2f} pp": {
        **{f"subsets n{n}": shifted_subsets(drops, true_drop=t, n=n) for n in PAIRS
           if n <= len(drops)},
        **{f"normal n{n}": normal_model(sd, true_drop=t, n=n, draws=draws) for n in PAIRS},
        "normal n6 then up to 12": normal_model(sd, true_drop=t, n=6, most=12, draws=draws)}
        for t in (truth.drop_pp, 0.0, 1.0, 2.0)}
    return res


def shifted_subsets(drops: list[float], *, true_drop: float, n: int) -> dict[str, float]:
    """The gate's answers on every subset of `n` of the K measured per-seed drops, all moved by
    the same amount so that their mean is `true_drop`: how a class whose seeds spread exactly as
    measured, and whose true drop is `true_drop`, is judged (no seed drawn twice)."""
    k = len(drops)
    mean = sum(drops) / k
    pool = [true_drop + d - mean for d in drops]
    counts = {a: 0 for a in G.Shown}
    subsets = list(itertools.combinations(pool, n))
    for sub in subsets:
        counts[_bound(list(sub)).answer] += 1
    return {a.value: round(c / len(subsets), 4) for a, c in counts.items()}


def normal_model(sd: float, *, true_drop: float, n: int, most: int = 0, draws: int = NORMAL_DRAWS,
                 seed: int = 0) -> dict[str, float]:
    """The gate's answers on `draws` sets of `n` per-seed drops drawn from a normal law of mean
    `true_drop` and the measured spread `sd` (what a t-test assumes). `most` > n: the adaptive
    rule too (quality/confirm.py and `verify --quality`: while not shown and gate.pairs_to_show
    says more seeds could show it, add them, up to `most` pairs in all)."""
    import random
    rng = random.Random(seed)
    counts = {a: 0 for a in G.Shown}
    for _ in range(draws):
        got = [rng.gauss(true_drop, sd) for _ in range(n)]
        b = _bound(got)
        while most and b.answer == G.Shown.NOT_SHOWN and len(got) < most:
            want = G.pairs_to_show(b, most=most)
            if want is None:
                break
            got += [rng.gauss(true_drop, sd) for _ in range(max(1, want - len(got)))]
            b = _bound(got)
        counts[b.answer] += 1
    return {a.value: round(c / draws, 4) for a, c in counts.items()}


def _bound(drops: list[float]) -> G.DropBound:
    """The gate on per-seed drops given directly (pp)."""
    return G.paired({i: 1.0 for i in range(len(drops))},
                    {i: 1.0 - d / 100 for i, d in enumerate(drops)}, TOLERANCE)


def mcnemar_upper(default: list[list[bool]], arm: list[list[bool]]) -> float:
    """One-sided 95% upper bound of the drop (pp) from per-example agreement pooled over pairs:
    b examples the default got and the arm missed, c the other way, N examples in all; the drop
    is (b - c) / N with variance (b + c - (b - c)^2 / N) / N^2 (McNemar's, for the difference of
    paired proportions)."""
    b = c = n = 0
    for dv, cv in zip(default, arm):
        for x, y in zip(dv, cv):
            b += x and not y
            c += y and not x
            n += 1
    drop = (b - c) / n
    var = (b + c - (b - c) ** 2 / n) / n ** 2
    return 100.0 * (drop + 1.645 * math.sqrt(max(var, 0.0)))


def old_table(path: str = OLD_RUNS) -> dict[str, Any]:
    """Round 3's 60 seeds a side (2048 held-out examples, 16384 samples) judged by the paired
    gate, 20 disjoint triples, and the per-seed figures behind the pairing."""
    rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    got = {(r["arm"], r["seed"]): r["quality"] for r in rows if r["quality"] is not None}
    out = {}
    for arm in sorted({a for a, _ in got} - {"default"}):
        seeds = sorted(s for a, s in got if a == arm and ("default", s) in got)
        d = {s: got[("default", s)] for s in seeds}
        c = {s: got[(arm, s)] for s in seeds}
        whole = G.paired(d, c, TOLERANCE)
        triples = [seeds[i:i + 3] for i in range(0, len(seeds) - 2, 3)]
        answers = [G.paired({s: d[s] for s in t}, {s: c[s] for s in t}, TOLERANCE).answer
                   for t in triples]
        out[arm] = {"seeds": len(seeds), "drop_pp": round(whole.drop_pp, 3),
                    "paired_sd_pp": round(whole.se_pp * math.sqrt(whole.n), 3),
                    "correlation": _r(whole.correlation),
                    "triples": len(triples),
                    **{a.value: answers.count(a) for a in G.Shown}}
    return out


def _acc(v: list[bool]) -> float:
    return sum(v) / len(v)


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def print_tables(t: dict[str, Any]) -> None:
    for key, entry in t.items():
        print(f"\n{entry['workload']}, {entry['samples']} samples a quality run "
              f"(--max-accuracy-drop {TOLERANCE:g}):")
        print(f"  {'arm':>10} {'K':>3} {'true drop':>12} {'corr':>5} {'eval':>6} {'sd_d':>5} "
              f"{'n':>2} {'within':>7} {'not':>6} {'beyond':>7} {'cover':>6} {'mcN in':>7} "
              f"{'mcN cov':>7}")
        for arm, a in entry["arms"].items():
            for n_eval, per in a["by_eval"].items():
                for n in PAIRS:
                    p = per.get(f"n{n}")
                    if p is None:
                        continue
                    print(f"  {arm:>10} {a['K']:>3} {a['true_drop_pp']:>+6.2f}±{a['true_drop_se_pp']:<4.2f}"
                          f" {a['correlation'] or 0:>5.2f} {n_eval:>6} {per['paired_sd_pp']:>5.2f} "
                          f"{n:>2} {p['within']:>7.0%} {p['not_shown']:>6.0%} {p['beyond']:>7.0%} "
                          f"{p['coverage']:>6.0%} {p['mcnemar_within']:>7.0%} "
                          f"{p['mcnemar_coverage']:>7.0%}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.accuracy.gate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", action="store_true", help="run the quality runs not stored yet")
    p.add_argument("--workload", default="cnn", help="built-in workload of the runs (--run)")
    p.add_argument("--seeds", type=int, default=8, help="seeds per arm and length (--run)")
    p.add_argument("--lengths", default="8192,16384", help="quality run lengths (--run)")
    p.add_argument("--runs", default=RUNS)
    p.add_argument("--out", default=OUT)
    p.add_argument("--old", action="store_true", help="round 3's runs under the paired gate")
    p.add_argument("--draws", type=int, default=NORMAL_DRAWS,
                   help=f"draws of the normal model per what-if ({NORMAL_DRAWS}; fewer for a quick look)")
    args = p.parse_args(argv)
    if args.seeds < 3 or args.draws < 1:
        print("accuracy_gate: --seeds must be at least 3 and --draws at least 1", file=sys.stderr)
        return 2
    try:
        lengths = [int(x) for x in args.lengths.split(",") if x]
    except ValueError:
        print(f"accuracy_gate: --lengths {args.lengths!r}: whole numbers, comma-separated",
              file=sys.stderr)
        return 2
    if args.old:
        print(json.dumps(old_table(), indent=1))
        return 0
    if args.run:
        from autotune.probe import probe
        from benchmarks.accuracy import gate_runs
        todo = [dict(workload=args.workload, arm=arm, seed=seed, samples=n,
                     label_noise=LABEL_NOISE.get(args.workload, {}).get(n, 0.1)
                     if arm == "noisy" else 0.0,
                     eval_samples=EVAL_SIZES[-1])
                for n in lengths for seed in range(args.seeds) for arm in gate_runs.ARMS]
        gate_runs.run_all(todo, args.runs, probe())
    from benchmarks.accuracy.gate_runs import load
    from benchmarks.timed.machine import describe as describe_machine
    t = tables(load(args.runs), args.draws)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"machine": describe_machine(), "tolerance_pp": TOLERANCE,
                   "length_of_budget": LENGTH_OF_BUDGET, "tables": t}, f, indent=1)
    print_tables(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
