"""Run one configuration N times through the worker directly (no runner) and report its spread.

    python3 benchmarks/timed/worker_repeat.py --repeats 5 --threads 2 --target 5

Reports throughput CV, launch-to-first-step seconds and the share of wall time spent in the timed
window: the numbers that say whether a single trial is precise and cheap enough to compare configs.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]   # run by path too: the checkout, before any import of it
sys.path.insert(0, str(ROOT))

from autotune.measure.stats import Stats, aggregate  # noqa: E402
from autotune.plan.launch_plan import RankExpect, WorkerRequest  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(request: WorkerRequest, workdir: Path, *, extra_env: dict[str, str] | None = None,
           timeout: float = 120.0) -> tuple[list[int | None], list[dict], float]:
    """Spawn every rank, wait, kill all on timeout. Returns (exit codes, results, launched_at)."""
    req_path = workdir / "request.json"
    req_path.write_text(json.dumps(request.to_json()))
    world, port = len(request.ranks), free_port()
    base = {**os.environ, "PYTHONPATH": str(ROOT), "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port), "WORLD_SIZE": str(world), **(extra_env or {})}
    procs = []
    launched_at = time.time()
    for r in range(world):
        env = {**base, "RANK": str(r), "LOCAL_RANK": str(r),
               "AUTOTUNE_RESULT": str(workdir / f"rank{r}.json")}
        log = open(workdir / f"rank{r}.log", "w")
        argv = [sys.executable, "-m", "autotune.worker", "--request", str(req_path)]
        procs.append(subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True, cwd=ROOT))
    deadline = time.monotonic() + timeout
    codes: list[int | None] = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            codes.append(None)
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    results = []
    for r in range(world):
        path = workdir / f"rank{r}.json"
        results.append(json.loads(path.read_text()) if path.exists() else {})
    return codes, results, launched_at


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--target", type=float, default=5.0)
    ap.add_argument("--workload", default="cnn")
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    config = {"nproc": 1, "threads": args.threads, "batch_size": args.batch_size,
              "backend": "gloo", "precision": "fp32"}
    req = WorkerRequest(workload=args.workload, config=config, target_seconds=args.target,
                        ranks=(RankExpect(cpus=None, threads=args.threads, allocator="default",
                                          omp_runtime="libgomp", precision="fp32"),))
    thr, mthr, startup, share, share_end = [], [], [], [], []
    for i in range(args.repeats):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.time()
            codes, results, launched = launch(req, Path(d),
                                              extra_env={"OMP_NUM_THREADS": str(args.threads)})
            wall = time.time() - t0
            if codes != [0]:
                log = (Path(d) / "rank0.log").read_text()
                raise SystemExit(f"run {i}: exit codes {codes}\n{log}")
            m = aggregate(results, launched)
            thr.append(m.throughput)
            mthr.append(m.median_throughput)
            share_end.append(m.timed_share)
            startup.append(m.startup_s)
            share.append(m.window_s / wall)
            print(f"run {i}: {m.throughput:.1f} samples/s (median-step {m.median_throughput:.1f}), "
                  f"step median {m.step_median_s * 1e3:.1f} ms "
                  f"IQR {m.step_iqr_s * 1e3:.1f} ms, startup {m.startup_s:.2f}s, "
                  f"window {m.window_s:.2f}s of {wall:.2f}s process wall, "
                  f"cpu share {m.cpu_share:.2f}, "
                  f"loadavg {results[0]['contention']['loadavg_start']:.2f}", flush=True)
    s = Stats.of(thr)
    print(f"throughput median {s.median:.1f} samples/s, CV {s.cv * 100:.2f}% over {s.n} runs")
    print(f"median-step throughput CV {Stats.of(mthr).cv * 100:.2f}%")
    print(f"launch to first step: median {Stats.of(startup).median:.2f}s")
    print(f"timed share of wall time: median {Stats.of(share).median * 100:.1f}% of process wall, "
          f"{Stats.of(share_end).median * 100:.1f}% of launch-to-window-end")


if __name__ == "__main__":
    main()
