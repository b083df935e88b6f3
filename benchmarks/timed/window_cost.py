"""What a window costs besides its timed seconds, started afresh or as the next window of a
launch already running (run/session.py), and what the step split's timers cost.

    python3 -m benchmarks.timed.window_cost --rounds 5                # ~5 minutes on 2 cores

Two measurements, each side by side in one run, rounds interleaved (A B, B A, ...):

  fixed cost   a fresh trial of the default launch against a window, in a running launch, of a
               knob that needs no new process (precision, global batch, channels_last, the
               DataLoader's workers). Fixed = the trial's wall seconds less its timed window:
               process start, imports, process group, model, pipeline, warm-up, teardown.
  split cost   the same configuration with the split's timers on and off (a fresh trial each,
               one rank and two gloo ranks, where the all-reduce hook runs): the ratio of the
               throughputs, on/off.

Results, with the machine: benchmarks/results/window_cost_<date>.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from autotune.config import Config
from benchmarks import RESULTS, out_folder_problem
from benchmarks.timed.machine import describe as describe_machine

# The knobs a running launch changes between windows, one step from the default launch each.
WINDOW_KNOBS = ({"precision": "bf16"}, {"global_batch": 64}, {"channels_last": True},
                {"dataloader_workers": 1})


def fixed_cost(topology, rounds: int, seconds: float, results: str, base: Config,
               workload: str) -> dict:
    from autotune.run.evaluate import live_evaluator
    from autotune.run.trial import TrialSettings, run_trial
    settings = TrialSettings(target_seconds=seconds, timeout_s=300.0, results_dir=results,
                             workload=workload)
    fresh, window, by_knob = [], [], {}
    warm = live_evaluator(topology, settings)
    try:
        warm(base, "throughput")       # the running launch's own first window
        for r in range(rounds):
            for side in (("fresh", "window") if r % 2 == 0 else ("window", "fresh")):
                if side == "fresh":
                    out = run_trial(base, topology, settings)
                    fresh.append(out.seconds - (out.window_s or 0.0))
                    continue
                for knob in WINDOW_KNOBS:
                    out = warm(base.with_(**knob), "throughput")
                    cost = out.seconds - (out.window_s or 0.0)
                    window.append(cost)
                    by_knob.setdefault(next(iter(knob)), []).append(cost)
            print(f"round {r + 1}/{rounds}: fresh {fresh[-1]:.2f} s, windows "
                  f"{[round(v[-1], 2) for v in by_knob.values()]}", flush=True)
    finally:
        warm.close()
    return {"fresh_s": _stats(fresh), "window_s": _stats(window),
            "by_knob": {k: _stats(v) for k, v in by_knob.items()},
            "ratio": statistics.median(window) / statistics.median(fresh)}


def split_cost(topology, rounds: int, seconds: float, results: str,
               pairs: tuple[tuple[str, Config], ...], workload: str) -> dict:
    """On and off alternate as windows of one running launch (each switch builds the model and
    DDP again, with or without the all-reduce's hook): what differs between fresh processes
    (their memory layout, which cores they land on) does not enter the ratio."""
    from autotune.run.trial import TrialSettings, run_trial
    from autotune.run.warm import WarmLaunches
    out: dict[str, dict] = {}
    for name, config in pairs:
        base = TrialSettings(target_seconds=seconds, timeout_s=300.0, results_dir=results,
                             workload=workload)
        warm = WarmLaunches()
        ratios = []
        try:
            run_trial(config, topology, base, warm=warm)     # the launch's own first window
            for r in range(rounds):
                thr = {}
                for on in ((True, False) if r % 2 == 0 else (False, True)):
                    res = run_trial(config, topology, replace(base, time_phases=on), warm=warm)
                    thr[on] = res.throughput
                if thr[True] and thr[False]:
                    ratios.append(thr[True] / thr[False])
                print(f"{name} round {r + 1}/{rounds}: on/off {ratios[-1]:.3f}", flush=True)
        finally:
            warm.close()
        out[name] = {"ratios": ratios, "median": statistics.median(ratios),
                     "min": min(ratios), "max": max(ratios)}
    return out


def _stats(values: list[float]) -> dict:
    return {"n": len(values), "median": statistics.median(values), "min": min(values),
            "max": max(values)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=3.0, help="each timed window")
    p.add_argument("--only", choices=("fixed", "split"), help="one of the two measurements")
    p.add_argument("--gpu", action="store_true", help="GPU launches (device=cuda, nccl)")
    p.add_argument("--workload", default="cnn")
    p.add_argument("--out", default=str(RESULTS), help="folder for the JSON (benchmarks/results)")
    args = p.parse_args(argv)
    if (why := out_folder_problem(args.out)) is not None:
        print(f"window_cost: error: {why}", file=sys.stderr)
        return 2
    if args.rounds < 2:
        print("window_cost: error: --rounds must be at least 2", file=sys.stderr)
        return 2
    from autotune.probe import probe
    topology = probe(None)
    results = "autotune-results-bench"
    out = {"machine": describe_machine(fingerprint=True),
           "command": "python3 -m benchmarks.timed.window_cost " + " ".join(argv or sys.argv[1:])}
    t0 = time.time()
    if args.gpu:
        base = Config(device="cuda", backend="nccl")
        pairs = (("1 GPU", base),)
    else:
        base = Config(threads=2)
        pairs = (("1 rank", base), ("2 gloo ranks", Config(nproc=2, threads=1)))
    if args.only in (None, "fixed"):
        out["fixed_cost"] = fixed_cost(topology, args.rounds, args.seconds, results, base,
                                       args.workload)
    if args.only in (None, "split"):
        out["split_cost"] = split_cost(topology, args.rounds, args.seconds, results, pairs,
                                       args.workload)
    out["seconds"] = round(time.time() - t0, 1)
    path = Path(args.out) / f"window_cost_{time.strftime('%Y-%m-%d')}.json"
    path.write_text(json.dumps(out, indent=1))
    print(json.dumps({k: v for k, v in out.items() if k != "machine"}, indent=1))
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
