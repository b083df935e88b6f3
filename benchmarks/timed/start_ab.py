"""A 2-rank trial's start, two checkouts of autotune side by side: what a change to the start of
every launch (issue 61: the rendezvous through a file store, the ranks' HMAC proof, no pickles)
costs.

    git worktree add --detach /tmp/before 6b8dfd5
    python3 -m benchmarks.timed.start_ab --before /tmp/before --after . --rounds 8

Each round runs `autotune run --set nproc=2 --set threads=1 --seconds 2 --json` from each
checkout (PYTHONPATH set to it), in alternating order (A B, B A, ...), and keeps the trial's wall
seconds less its timed window (start, imports, process group, model, warm-up, teardown) and the
fixed stages the worker timed. Results, with the machine: --out (benchmarks/results)/start_ab_<date>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import RESULTS, out_folder_problem
from benchmarks.timed.machine import describe as describe_machine
from benchmarks.timed.window_cost import _stats

ARGV = ["-m", "autotune", "run", "--set", "nproc=2", "--set", "threads=1", "--seconds", "2",
        "--json"]


def one(tree: Path) -> dict | None:
    """One trial from `tree`'s autotune; None when it did not end ok (said on stderr)."""
    with tempfile.TemporaryDirectory() as results:
        env = dict(os.environ, PYTHONPATH=str(tree))
        p = subprocess.run([sys.executable, *ARGV, "--results", results], cwd=tree, env=env,
                           capture_output=True, text=True, check=False)
    try:
        out = json.loads(p.stdout)
    except json.JSONDecodeError:
        print(f"{tree}: no result (exit {p.returncode}): {p.stderr.strip()[-300:]}",
              file=sys.stderr)
        return None
    m = out.get("measurement") or {}
    if out.get("outcome") != "ok" or not m:
        print(f"{tree}: {out.get('outcome')}: {out.get('reason')}", file=sys.stderr)
        return None
    return {"seconds": out["wall_seconds"], "window_s": m["window_s"], "fixed": m["fixed"],
            "startup_s": m["startup_s"], "throughput": m["throughput"]}


def summary(rows: list[dict]) -> dict:
    return {"runs": len(rows),
            "besides_window_s": _stats([r["seconds"] - r["window_s"] for r in rows]),
            "fixed_stages_s": _stats([sum(r["fixed"].values()) for r in rows]),
            "group_s": statistics.median(r["fixed"].get("group", 0.0) for r in rows)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", required=True, help="the checkout before the change")
    p.add_argument("--after", default=".", help="the checkout with it (this one)")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--out", default=str(RESULTS), help="folder for the JSON")
    args = p.parse_args()
    if (why := out_folder_problem(args.out)) is not None:
        print(f"start_ab: {why}", file=sys.stderr)
        return 2
    trees = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    for name, tree in trees.items():
        if not (tree / "autotune" / "__init__.py").is_file():
            print(f"start_ab: --{name} {tree}: not a checkout of autotune", file=sys.stderr)
            return 2
    rows: dict[str, list[dict]] = {"before": [], "after": []}
    t0 = time.perf_counter()
    for r in range(args.rounds):
        for name in (("before", "after") if r % 2 == 0 else ("after", "before")):
            got = one(trees[name])
            if got is not None:
                rows[name].append(got)
                print(f"round {r + 1}/{args.rounds} {name}: "
                      f"{got['seconds'] - got['window_s']:.2f} s besides the window", flush=True)
    if not all(rows.values()):
        print("start_ab: a side has no trial that ended ok", file=sys.stderr)
        return 1
    out = {"machine": describe_machine(fingerprint=True), "argv": ARGV,
           "trees": {k: str(v) for k, v in trees.items()}, "runs": rows,
           "summary": {k: summary(v) for k, v in rows.items()},
           "seconds": round(time.perf_counter() - t0, 1)}
    s = out["summary"]
    ratio = s["after"]["besides_window_s"]["median"] / s["before"]["besides_window_s"]["median"]
    out["ratio"] = ratio
    print(f"besides the window: before {s['before']['besides_window_s']['median']:.2f} s, "
          f"after {s['after']['besides_window_s']['median']:.2f} s ({ratio:.2f}x)")
    path = Path(args.out) / f"start_ab_{time.strftime('%Y-%m-%d')}.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
