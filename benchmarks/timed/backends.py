"""ccl (oneCCL, autotune/comm/ccl) against gloo, side by side in one run, labelled by machine.

    python3 -m benchmarks.timed.backends                                   # everything below
    python3 -m benchmarks.timed.backends --ranks 2 --rounds 3 --skip-ddp   # all-reduce only
    python3 -m benchmarks.timed.backends --skip-allreduce --workloads wide_mlp --rounds 5

1. All-reduce latency and bandwidth, float32, 4 KB to 64 MB, at 2 and 4 ranks: both backends in
   the same processes, rounds alternating gloo/ccl (benchmarks/timed/backend_ranks.py). Per size: the
   median time of each backend and the ccl/gloo speedup per round (median and IQR over rounds).
2. End-to-end DDP step time of built-in workloads at one layout (2 ranks x 1 thread, taskset):
   `autotune run` trials alternating gloo, ccl, ccl, gloo, ...; the throughput ratio ccl/gloo per
   pair of rounds. `cnn` all-reduces ~0.3 MB a step; `wide_mlp` (21M parameters) ~84 MB.

Writes benchmarks/results/backends.json with the machine (CPU model and family, cores, date,
fingerprint) and the load average before and after, to say when other processes took the cores.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from autotune.measure.stats import ratio_stats
from benchmarks import RESULTS, ROOT
from benchmarks.timed.machine import describe as describe_machine

HERE = Path(__file__).resolve().parent
DEFAULT_SIZES = [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def allreduce(world: int, sizes: list[int], rounds: int) -> dict[str, Any]:
    from autotune.run.runner import free_port
    port = str(free_port())
    procs = []
    for rank in range(world):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": port, "OMP_NUM_THREADS": "1", "CCL_LOG_LEVEL": "error",
               "PYTHONPATH": str(ROOT)}
        procs.append(subprocess.Popen([sys.executable, str(HERE / "backend_ranks.py"),
                                       ",".join(map(str, sizes)), str(rounds)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
    outs = [p.communicate(timeout=1800)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"backends: the {world}-rank all-reduce run failed")
    data = json.loads([line for line in outs[0].splitlines() if line.startswith("{")][-1])
    rows = []
    for entry in data["sizes"]:
        g, c = entry["seconds"]["gloo"], entry["seconds"]["ccl"]
        r = ratio_stats(g, c)                     # gloo time / ccl time = ccl's speedup
        med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
        rows.append({"bytes": entry["bytes"], "gloo_us": med(g) * 1e6, "ccl_us": med(c) * 1e6,
                     "gloo_GBs": entry["bytes"] / med(g) / 1e9, "ccl_GBs": entry["bytes"] / med(c) / 1e9,
                     "speedup": r.median, "speedup_q1": r.q1, "speedup_q3": r.q3})
    return {"world": world, "rounds": rounds, "rows": rows}


def trial(workload: str, backend: str, seconds: float, results: Path) -> float | None:
    cmd = [sys.executable, "-c", "import sys; from autotune.cli import main; sys.exit(main(sys.argv[1:]))",
           "run", "--workload", workload, "--set", "nproc=2", "--set", "threads=1",
           "--set", "binding=taskset", "--set", f"backend={backend}", "--seconds", str(seconds),
           "--results", str(results), "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    try:
        out = json.loads(done.stdout)
    except ValueError:
        return None
    m = out.get("measurement") or {}
    return m.get("throughput") if out.get("outcome") == "ok" else None


def ddp(workloads: list[str], rounds: int, seconds: float, results: Path) -> list[dict[str, Any]]:
    rows = []
    for workload in workloads:
        got: dict[str, list[float]] = {"gloo": [], "ccl": []}
        for r in range(rounds):
            for backend in (("gloo", "ccl") if r % 2 == 0 else ("ccl", "gloo")):
                thr = trial(workload, backend, seconds, results)
                if thr is None:
                    raise SystemExit(f"backends: {workload} with {backend} did not measure")
                got[backend].append(thr)
                print(f"  {workload:9} round {r + 1} {backend:5} {thr:8.1f} samples/s", flush=True)
        s = ratio_stats(got["ccl"], got["gloo"])
        rows.append({"workload": workload, "gloo": got["gloo"], "ccl": got["ccl"],
                     "speedup": s.median, "speedup_q1": s.q1, "speedup_q3": s.q3})
    return rows


def print_tables(result: dict[str, Any]) -> None:
    m = result["machine"]
    print(f"\nmachine: {m.get('model name')} (family {m.get('cpu family')} model {m.get('model')}), "
          f"{m['cores']} cores, fingerprint {m['fingerprint']}, {m['date']}; load "
          f"{result['load_before'][0]:.2f} before, {result['load_after'][0]:.2f} after")
    for run in result.get("allreduce", []):
        print(f"\nall-reduce, float32, {run['world']} ranks, {run['rounds']} alternating rounds")
        print(f"{'size':>8} {'gloo':>10} {'ccl':>10} {'ccl GB/s':>9} {'speedup':>8} {'IQR':>13}")
        for row in run["rows"]:
            size = row["bytes"]
            label = f"{size >> 20} MB" if size >= 1 << 20 else f"{size >> 10} KB"
            print(f"{label:>8} {row['gloo_us']:>8.0f}us {row['ccl_us']:>8.0f}us {row['ccl_GBs']:>9.2f} "
                  f"{row['speedup']:>7.2f}x {row['speedup_q1']:>6.2f}-{row['speedup_q3']:<6.2f}")
    if result.get("ddp"):
        print("\nDDP end to end, 2 ranks x 1 thread, taskset; ccl/gloo throughput per round pair")
        for row in result["ddp"]:
            print(f"{row['workload']:>9}: gloo {sorted(row['gloo'])[len(row['gloo']) // 2]:.1f}, "
                  f"ccl {sorted(row['ccl'])[len(row['ccl']) // 2]:.1f} samples/s; "
                  f"speedup {row['speedup']:.2f}x (IQR {row['speedup_q1']:.2f}-{row['speedup_q3']:.2f})")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.timed.backends", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", default="2,4", help="rank counts for the all-reduce (default 2,4)")
    p.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)),
                   help="all-reduce sizes in bytes (default 4 KB ... 64 MB)")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    p.add_argument("--workloads", default="cnn,wide_mlp", help="DDP workloads (default cnn,wide_mlp)")
    p.add_argument("--seconds", type=float, default=4.0, help="timed window of a DDP trial")
    p.add_argument("--skip-allreduce", action="store_true")
    p.add_argument("--skip-ddp", action="store_true")
    p.add_argument("--out", default=str(RESULTS / "backends.json"))
    args = p.parse_args(argv)
    from autotune.comm import ccl
    why = ccl.problem()
    if why:
        print(f"backends: ccl unavailable here ({why})", file=sys.stderr)
        return 2
    result: dict[str, Any] = {"machine": describe_machine(fingerprint=True), "load_before": os.getloadavg(),
                              "command": "python3 -m benchmarks.timed.backends " + " ".join(argv or sys.argv[1:])}
    if not args.skip_allreduce:
        sizes = [int(s) for s in args.sizes.split(",")]
        result["allreduce"] = [allreduce(int(w), sizes, args.rounds) for w in args.ranks.split(",")]
    if not args.skip_ddp:
        import tempfile
        with tempfile.TemporaryDirectory(prefix="autotune-backends-") as tmp:
            result["ddp"] = ddp(args.workloads.split(","), args.rounds, args.seconds, Path(tmp))
    result["load_after"] = os.getloadavg()
    Path(args.out).write_text(json.dumps(result, indent=1))
    print_tables(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
