"""The accuracy gate over 20 repetitions: how often does it reject neutral and harmful changes?

Each repetition i judges every arm against the default launch exactly as `autotune search` does:
seeded quality runs (real trials: `autotune.run.trial.run_trial(mode="accuracy")`, the search's
length) with the seeds {3i, 3i+1, 3i+2} on both sides, then `quality.gate` at
--max-accuracy-drop. Arms:

  bf16         precision=bf16 (neutral: expected to be accepted)
  2ranks       nproc=2 at the default's global batch, per-rank BatchNorm (neutral)
  lr8x         8x the workload's learning rate at the same batch (harmful)
  gb256        global batch 256 with the learning rate unscaled (harmful)

Runs are appended to a JSON-lines file as they finish, so the benchmark resumes where it stopped
(Ctrl-C, a crash). Two 1-rank runs go at once (one thread each); a 2-rank run takes both cores.

    python3 -m benchmarks.accuracy_gate --reps 20              # ~1 hour on 2 cores
    python3 -m benchmarks.accuracy_gate --reps 20 --report     # the table from what is stored
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from autotune.quality import gate as Q
from autotune.config import Config
from autotune.probe import probe
from autotune.run.trial import TrialSettings, run_trial
from autotune.training import QUALITY_SAMPLES
from benchmarks.machine import describe as describe_machine

ARMS: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
    # name: (config changes, workload args, expectation)
    "default": ({}, {}, "reference"),
    "bf16": ({"precision": "bf16"}, {}, "neutral"),
    "2ranks": ({"nproc": 2}, {}, "neutral"),
    "lr8x": ({}, {"lr": 1.6}, "harmful"),
    "gb256": ({"global_batch": 256, "lr_rule": "none"}, {}, "harmful"),
}


def _config(arm: str) -> Config:
    return Config(threads=1, **ARMS[arm][0])


def _run(topology, arm: str, seed: int, samples: int, results: str) -> dict[str, Any]:
    settings = TrialSettings(workload="cnn", workload_args=ARMS[arm][1], accuracy_samples=samples,
                             results_dir=results, timeout_s=1800.0)
    t0 = time.time()
    out = run_trial(_config(arm), topology, settings, mode="accuracy", seed=seed)
    return {"arm": arm, "seed": seed, "samples": samples, "outcome": out.outcome,
            "reason": out.reason, "quality": out.accuracy if out.ok else None,
            "curve": [list(p) for p in out.curve] if out.ok else None,
            "seconds": round(time.time() - t0, 1)}


def load(path: str) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def table(rows: list[dict[str, Any]], reps: int, tolerance: float, samples: int) -> dict[str, Any]:
    got = {(r["arm"], r["seed"]): r["quality"] for r in rows
           if r["samples"] == samples and r["quality"] is not None}
    out: dict[str, Any] = {"tolerance_pp": tolerance, "samples": samples, "arms": {}}
    for arm, (_, _, kind) in ARMS.items():
        vals = [got[(arm, s)] for s in range(3 * reps) if (arm, s) in got]
        entry: dict[str, Any] = {"expect": kind, "runs": len(vals),
                                 "mean": statistics.mean(vals) if vals else None,
                                 "sd": statistics.stdev(vals) if len(vals) > 1 else None}
        if arm != "default":
            decisions = []
            for i in range(reps):
                seeds = range(3 * i, 3 * i + 3)
                d = [got.get(("default", s)) for s in seeds]
                c = [got.get((arm, s)) for s in seeds]
                if None in d or None in c:
                    continue
                v = Q.gate(Q.Sample(tuple(d)), Q.Sample(tuple(c)), tolerance)
                decisions.append({"rep": i, "reject": v.reject, "drop_pp": round(v.drop_pp, 3),
                                  "noise_pp": round(v.noise_pp, 3)})
            entry.update(decided=len(decisions), rejected=sum(d["reject"] for d in decisions),
                         decisions=decisions)
        out["arms"][arm] = entry
    return out


def print_table(t: dict[str, Any]) -> None:
    print(f"accuracy gate: {t['samples']} samples per quality run, 3 seeds a side, "
          f"--max-accuracy-drop {t['tolerance_pp']:g}")
    print(f"{'arm':>8} {'expect':>9} {'runs':>5} {'mean':>7} {'sd':>6} {'rejected':>12}")
    for arm, e in t["arms"].items():
        mean = f"{e['mean']:.4f}" if e["mean"] is not None else "-"
        sd = f"{e['sd']:.4f}" if e["sd"] is not None else "-"
        rej = f"{e['rejected']}/{e['decided']}" if "decided" in e else ""
        print(f"{arm:>8} {e['expect']:>9} {e['runs']:>5} {mean:>7} {sd:>6} {rej:>12}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.accuracy_gate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=20, help="gate decisions per arm (default 20)")
    p.add_argument("--samples", type=int, default=QUALITY_SAMPLES,
                   help=f"training samples per quality run (default {QUALITY_SAMPLES})")
    p.add_argument("--tolerance", type=float, default=1.0, help="--max-accuracy-drop (pp)")
    p.add_argument("--arms", default=",".join(ARMS), help="comma-separated arms to run")
    p.add_argument("--runs", default="benchmarks/results/accuracy_gate_runs.jsonl")
    p.add_argument("--out", default="benchmarks/results/accuracy_gate.json")
    p.add_argument("--report", action="store_true", help="only print the table from stored runs")
    p.add_argument("--parallel", type=int, default=2, help="1-rank runs at once (default 2)")
    args = p.parse_args(argv)
    arms = [a for a in args.arms.split(",") if a]
    unknown = [a for a in arms if a not in ARMS]
    if unknown or args.reps < 1:
        print(f"accuracy_gate: unknown arm {unknown} (valid: {', '.join(ARMS)})" if unknown
              else "accuracy_gate: --reps must be >= 1", file=sys.stderr)
        return 2
    os.makedirs(os.path.dirname(args.runs) or ".", exist_ok=True)
    if not args.report:
        topology = probe()
        done = {(r["arm"], r["seed"]) for r in load(args.runs)
                if r["samples"] == args.samples and r["outcome"] == "ok"}
        # Repetition by repetition, so a partial run still yields whole gate decisions.
        todo = [(a, s) for i in range(args.reps) for a in arms for s in range(3 * i, 3 * i + 3)
                if (a, s) not in done]
        print(f"accuracy_gate: {len(todo)} quality runs to go", file=sys.stderr)
        results = os.path.abspath("autotune-results/accuracy-gate")
        singles = [t for t in todo if _config(t[0]).nproc == 1]
        doubles = [t for t in todo if _config(t[0]).nproc > 1]
        with open(args.runs, "a", encoding="utf-8") as sink, \
                ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
            def record(row: dict[str, Any]) -> None:
                sink.write(json.dumps(row) + "\n")
                sink.flush()
                print(f"  {row['arm']:>8} seed {row['seed']:>2}: {row['outcome']} "
                      f"{row['quality']} ({row['seconds']}s)", file=sys.stderr, flush=True)
            # Interleave: after each pair of 1-rank runs, one 2-rank run (it needs both cores).
            while singles or doubles:
                batch = [singles.pop(0) for _ in range(min(len(singles), args.parallel))]
                for row in pool.map(lambda t: _run(topology, t[0], t[1], args.samples, results),
                                    batch):
                    record(row)
                if doubles:
                    t = doubles.pop(0)
                    record(_run(topology, t[0], t[1], args.samples, results))
    t = table(load(args.runs), args.reps, args.tolerance, args.samples)
    t["machine"] = describe_machine()
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(t, f, indent=1)
    print_table(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
