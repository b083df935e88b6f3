"""Interleaved A/B of one knob in real trials: IPEX on/off, libiomp5/libgomp (README, "The Intel stack").

    python -m benchmarks.intel_ab --python PY --a ipex=on --b ipex=off --set precision=bf16 --rounds 3

Runs `PY -m autotune run --json` alternately A B A B ... with every other knob the same, and prints
each round's throughputs, the load average and CPU share each trial's window received, and
ratio_stats(A, B). PY may be another environment (scripts/intel-env.sh) whose torch IPEX matches.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from autotune.measure import ratio_stats

REPO = Path(__file__).resolve().parent.parent


def trial(python: str, sets: list[str], args: argparse.Namespace, results: str) -> dict:
    argv = [python, "-m", "autotune", "run", "--json", "--results", results,
            "--seconds", str(args.seconds), "--workload", args.workload]
    for s in sets:
        argv += ["--set", s]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"trial failed ({' '.join(sets)}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    out = json.loads(proc.stdout)
    if out["outcome"] != "ok":
        sys.exit(f"trial {out['outcome']} ({' '.join(sets)}): {out['reason']}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.intel_ab")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--a", action="append", required=True, help="KNOB=VALUE of candidate A")
    p.add_argument("--b", action="append", required=True, help="KNOB=VALUE of baseline B")
    p.add_argument("--set", action="append", default=[], help="KNOB=VALUE for both")
    p.add_argument("--workload", default="cnn")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    a_tp, b_tp = [], []
    with tempfile.TemporaryDirectory(prefix="intel-ab-") as results:
        for r in range(args.rounds):
            for label, knobs, into in (("A", args.a, a_tp), ("B", args.b, b_tp)):
                m = trial(args.python, args.set + knobs, args, results)["measurement"]
                into.append(m["throughput"])
                print(f"round {r + 1} {label} {' '.join(knobs):24s} {m['throughput']:9.2f} samples/s"
                      f"  cpu_share {m['cpu_share']:.2f}  load {os.getloadavg()[0]:.2f}",
                      flush=True)
    rs = ratio_stats(a_tp, b_tp)
    print(f"A/B throughput ratio: median {rs.median:.3f} (IQR {rs.q1:.3f}-{rs.q3:.3f}), "
          f"rounds {', '.join(f'{x:.3f}' for x in rs.ratios)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
