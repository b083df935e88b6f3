"""Is a compiled launch the default's math? Paired quality runs, compiled against eager, on the
built-in workloads over several seeds (issue 59: quality/math_class.py treats compile=true as its
eager twin's class on the strength of this).

    python3 -m benchmarks.accuracy.compile_same_math --seeds 8
    python3 -m benchmarks.accuracy.compile_same_math --workloads mlp --seeds 2 --samples 256  # check

Per workload and seed, two real quality runs of autotune's worker (`run_trial(mode="accuracy")`,
the same seed, so the same initial weights, data order and held-out set): eager (the default
launch) and compiled (the same launch, compile=true). Inductor reorders floating-point
operations, so the two differ in the last bits and drift apart over training as any two
orderings do; what the claim needs is that they drift no further apart than two seeds of eager.

Per workload it prints the eager seed-to-seed spread (sd over seeds), the paired differences
(compiled - eager, same seed) with their mean and its 95% interval, and the verdict of `agree`:
"within" when that interval lies inside +-(eager's seed sd), "beyond" when it lies outside it,
else "not shown" (more seeds). Rows are appended to a JSON-lines file as each run finishes (the
same command resumes).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
from typing import Any

from autotune.config import BUILTIN_WORKLOADS, Config
from autotune.probe import probe
from autotune.run.trial import TrialSettings, run_trial

from benchmarks import RESULTS

ARMS = ("eager", "compiled")
# two-sided 95% Student t quantiles by degrees of freedom (1..30); beyond, the normal's
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def agree(eager: list[float], compiled: list[float]) -> dict[str, Any]:
    """The verdict on seed-paired runs (eager[i] and compiled[i] share seed i): the mean paired
    difference's 95% interval against eager's own seed-to-seed sd."""
    if len(eager) != len(compiled) or len(eager) < 2:
        return {"pairs": min(len(eager), len(compiled)), "verdict": "not shown"}
    diffs = [c - e for e, c in zip(eager, compiled)]
    n, spread = len(diffs), statistics.stdev(eager)
    mean = statistics.fmean(diffs)
    half = (_T95[n - 2] if n - 1 <= len(_T95) else 1.96) * statistics.stdev(diffs) / math.sqrt(n)
    low, high = mean - half, mean + half
    verdict = "within" if -spread <= low and high <= spread else \
        "beyond" if high < -spread or low > spread else "not shown"
    return {"pairs": n, "eager_seed_sd": spread, "mean_diff": mean, "ci95": [low, high],
            "max_abs_diff": max(abs(d) for d in diffs), "verdict": verdict}


def describe(workload: str, a: dict[str, Any]) -> str:
    if "mean_diff" not in a:
        return f"{workload}: {a['pairs']} pair(s), not shown (2 or more seeds needed)"
    return (f"{workload}: compiled - eager {a['mean_diff'] * 100:+.2f} pp "
            f"(95% [{a['ci95'][0] * 100:+.2f}, {a['ci95'][1] * 100:+.2f}], largest "
            f"{a['max_abs_diff'] * 100:.2f} pp) against eager's seed sd "
            f"{a['eager_seed_sd'] * 100:.2f} pp over {a['pairs']} seeds: {a['verdict']}")


def load(path: str) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def run_missing(path: str, workloads: list[str], seeds: int, samples: int | None,
                threads: int) -> None:
    """Every (workload, seed, arm) run not stored yet, seed by seed (a partial run still gives
    whole pairs), each row appended as it finishes."""
    done = {(r["workload"], r["seed"], r["arm"]) for r in load(path) if r["quality"] is not None
            and r.get("samples") == samples}
    topology = probe(None)
    results = tempfile.mkdtemp(prefix="compile-math-")
    for seed in range(seeds):
        for workload in workloads:
            for arm in ARMS:
                if (workload, seed, arm) in done:
                    continue
                settings = TrialSettings(workload=workload, results_dir=results, timeout_s=3600.0,
                                         **({"accuracy_samples": samples} if samples else {}))
                out = run_trial(Config(threads=threads, compile=arm == "compiled"), topology,
                                settings, mode="accuracy", seed=seed)
                row = {"workload": workload, "seed": seed, "arm": arm, "samples": samples,
                       "outcome": str(out.outcome), "reason": out.reason,
                       "quality": out.accuracy if out.ok else None,
                       "seconds": round(out.seconds, 1)}
                print(f"  {workload} seed {seed} {arm}: {row['quality']}", file=sys.stderr,
                      flush=True)
                with open(path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")


def verdicts(rows: list[dict[str, Any]], samples: int | None) -> dict[str, dict[str, Any]]:
    """Per workload, `agree` on the seeds both arms have."""
    out = {}
    for workload in dict.fromkeys(r["workload"] for r in rows):
        q = {(r["seed"], r["arm"]): r["quality"] for r in rows if r["workload"] == workload
             and r.get("samples") == samples and r["quality"] is not None}
        seeds = sorted(s for s, a in q if a == "eager" and (s, "compiled") in q)
        out[workload] = agree([q[(s, "eager")] for s in seeds], [q[(s, "compiled")] for s in seeds])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.accuracy.compile_same_math",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", nargs="+", default=list(BUILTIN_WORKLOADS),
                   choices=BUILTIN_WORKLOADS)
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--samples", type=int, default=None,
                   help="samples per quality run (default: the workload's own length)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=str(RESULTS / "compile_same_math.jsonl"))
    args = p.parse_args(argv)
    run_missing(args.out, args.workloads, args.seeds, args.samples, args.threads)
    rows = [r for r in load(args.out) if r["workload"] in args.workloads]
    for workload, a in verdicts(rows, args.samples).items():
        print(describe(workload, a))
    return 0


if __name__ == "__main__":
    sys.exit(main())
