"""The seeded quality runs behind benchmarks/accuracy/gate.py: real quality runs of autotune's
worker (`run_trial(mode="accuracy")`, one process with both cores, one run at a time), each
storing its held-out outcomes example by example (benchmarks/workloads/gate_probe.py), appended
to a JSON-lines file as it finishes (Ctrl-C, then the same command, resumes).

Arms, per workload:
  default   the default launch's math (fp32, the reference global batch)
  bf16      precision=bf16: the class that truly loses nothing (long runs measure it at -0.3 pp
            on the cnn; the 60-seed record of round 3 at +0.05 ± 0.06 pp)
  noisy     the default's math trained with a share of its training labels replaced at random
            (--label-noise): a class that truly loses, by an amount the many seeds measure
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import Any, Iterable

from autotune.config import Config
from autotune.run.trial import TrialSettings, run_trial
from benchmarks.workloads import gate_probe

ARMS = ("default", "bf16", "noisy")


def arm_config(arm: str) -> Config:
    return Config(threads=2, precision="bf16" if arm == "bf16" else "fp32")


def run_one(topology, *, workload: str, arm: str, seed: int, samples: int, label_noise: float,
            eval_samples: int, results: str) -> dict[str, Any]:
    """One quality run; its row (the per-example outcomes in `held_out`)."""
    args = {"workload": workload, "eval_samples": eval_samples,
            "label_noise": label_noise if arm == "noisy" else 0.0}
    settings = TrialSettings(workload="benchmarks.workloads.gate_probe:build", workload_args=args,
                             accuracy_samples=samples, results_dir=results, timeout_s=3600.0)
    fd, dump = tempfile.mkstemp(prefix="gate-", suffix=".bits")
    os.close(fd)
    config = arm_config(arm)
    os.environ[gate_probe.DUMP_ENV] = dump
    os.environ[gate_probe.PRECISION_ENV] = config.precision
    t0 = time.time()
    try:
        out = run_trial(config, topology, settings, mode="accuracy", seed=seed)
        with open(dump, encoding="utf-8") as f:
            bits = f.read().strip()
    finally:
        os.unlink(dump)
        for k in (gate_probe.DUMP_ENV, gate_probe.PRECISION_ENV):
            os.environ.pop(k, None)
    ok = out.ok and bool(bits)
    return {"workload": workload, "arm": arm, "seed": seed, "samples": samples,
            "label_noise": args["label_noise"], "eval_samples": eval_samples,
            "outcome": out.outcome, "reason": out.reason,
            "quality": out.accuracy if ok else None,
            "curve": [list(p) for p in out.curve] if ok else None,
            "held_out": bits if ok else None, "seconds": round(time.time() - t0, 1)}


def load(path: str) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def key(row: dict[str, Any]) -> tuple:
    return (row["workload"], row["arm"], row["seed"], row["samples"], row["label_noise"])


def run_all(todo: Iterable[dict[str, Any]], path: str, topology) -> None:
    """Run every planned run not stored yet, seed by seed across arms (a partial run still
    yields whole pairs), appending each row as it finishes."""
    done = {key(r) for r in load(path) if r["outcome"] == "ok"}
    plan = [t for t in todo if key({**t, "label_noise": t["label_noise"] if t["arm"] == "noisy"
                                    else 0.0}) not in done]
    print(f"gate runs: {len(plan)} quality runs to go", file=sys.stderr, flush=True)
    results = os.path.abspath("autotune-results/accuracy-gate")
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "a", encoding="utf-8") as sink:
        for i, t in enumerate(plan, 1):
            row = run_one(topology, results=results, **t)
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            print(f"  [{i}/{len(plan)}] {row['workload']} {row['arm']:>7} seed {row['seed']:>2} "
                  f"{row['samples']:>6} samples: {row['outcome']} {row['quality']} "
                  f"({row['seconds']}s)", file=sys.stderr, flush=True)
