"""What a shorter quality run costs in the noise it can resolve: the built-in cnn's held-out
accuracy over seeds at several run lengths, and the accuracy gate's noise term it gives.

A search sizes its quality runs by time (autotune/quality/sizing.py): a fast machine trains
longer runs in the same seconds, a slow one shorter ones. Shorter runs are noisier, and the gate
(autotune/quality/gate.py) widens its tolerance by exactly that noise, so its verdicts stay
honest; what a short run costs is power: a class must lose more before it is rejected. This
measures, per length, the seeds' mean and sd and the gate's noise for 3 seeds against 3
(t(0.95, Welch df) x the standard error of the difference, both sides with that sd).

Every run is one seeded quality run of the default launch's math, in one kept-warm worker of
one launch (run/session.py), run side by side with nothing else. Results are appended as they
finish (resumable) and the table is written with the machine:

    python3 -m benchmarks.accuracy.quality_length --seeds 5                       # ~5 minutes on 2 cores
    python3 -m benchmarks.accuracy.quality_length --report                        # the table again
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

from autotune.config import Config
from autotune.quality.gate import t95, welch_df
from benchmarks.timed.machine import describe as describe_machine

LENGTHS = (4096, 8192, 12288, 16384)
RUNS = "benchmarks/results/quality_length_runs.jsonl"
OUT = "benchmarks/results/quality_length.json"
# The default launch's math (fp32, global batch 32) run the quickest way on 2 cores.
LAUNCH = Config(binding="numactl", allocator="tcmalloc")


def measure(seeds: int, lengths: tuple[int, ...], path: str) -> None:
    from autotune.probe import probe
    from autotune.run.evaluate import live_evaluator
    from autotune.run.trial import TrialSettings
    done = {(r["samples"], r["seed"]) for r in load(path)}
    topology = probe(None)
    evaluate = live_evaluator(topology, TrialSettings(workload="cnn", timeout_s=1800.0,
                                                      results_dir="autotune-results-bench"))
    try:
        for seed in range(seeds):
            for samples in lengths:
                if (samples, seed) in done:
                    continue
                t0 = time.time()
                out = evaluate(LAUNCH, "accuracy", seed=seed, samples=samples)
                row = {"samples": samples, "seed": seed, "outcome": out.outcome,
                       "quality": out.accuracy if out.ok else None,
                       "seconds": round(time.time() - t0, 2)}
                print(json.dumps(row), flush=True)
                with open(path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")
    finally:
        evaluate.close()


def load(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def table(rows: list[dict]) -> list[dict]:
    out = []
    for samples in sorted({r["samples"] for r in rows}):
        vals = [r["quality"] for r in rows if r["samples"] == samples and r["quality"] is not None]
        secs = [r["seconds"] for r in rows if r["samples"] == samples]
        if len(vals) < 2:
            continue
        sd = statistics.stdev(vals) * 100
        var = sd ** 2 / 3
        noise = t95(welch_df(var, var, 3, 3)) * math.sqrt(2 * var)
        out.append({"samples": samples, "seeds": len(vals), "mean": statistics.mean(vals),
                    "sd_pp": round(sd, 2), "gate_noise_3v3_pp": round(noise, 2),
                    "median_run_s": statistics.median(secs)})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--lengths", type=lambda s: tuple(int(x) for x in s.split(",")),
                   default=LENGTHS)
    p.add_argument("--runs", default=RUNS)
    p.add_argument("--out", default=OUT)
    p.add_argument("--report", action="store_true", help="only the table from stored runs")
    args = p.parse_args(argv)
    if args.seeds < 2:
        print("quality_length: error: --seeds must be at least 2", file=sys.stderr)
        return 2
    if not args.report:
        measure(args.seeds, args.lengths, args.runs)
    rows = table(load(args.runs))
    result = {"machine": describe_machine(fingerprint=True), "launch": LAUNCH.key(),
              "command": "python3 -m benchmarks.accuracy.quality_length " + " ".join(argv or sys.argv[1:]),
              "lengths": rows}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    for r in rows:
        print(f"{r['samples']:>6} samples: {r['mean']:.4f} ± {r['sd_pp']:.2f} pp over "
              f"{r['seeds']} seeds; 3-vs-3 gate noise {r['gate_noise_3v3_pp']:.2f} pp; "
              f"{r['median_run_s']:.1f} s a run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
