"""What the step split's timers cost one rank's step, step by step (issue 43: at most 2%).

Windows of whole launches spread by about ±10% on the 2-core VMs, run to run and window to
window (benchmarks/timed/window_cost.py), more than any cost the timers could have. So this measures
in one process: the built-in worker's own trainer (worker/trainer.py), one rank of a gloo group,
its timers switched on and off step by step (on, off, off, on, ...), every step timed. What
drifts (caches, the allocator, frequency) hits both sides alike; the ratio of the medians and a
bootstrap interval over the pairs say what the timers cost.

    python3 -m benchmarks.timed.split_timers --steps 600        # ~30 s on 2 cores

The all-reduce's comm hook, which two ranks add, is in window_cost's two-rank figure.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time

from benchmarks import RESULTS
from benchmarks.timed.machine import describe as describe_machine



def measure(steps: int, threads: int) -> dict:
    import torch
    import torch.distributed as dist

    from autotune.config import Config
    from autotune.plan.launch_plan import RankExpect, WorkerRequest
    from autotune.worker import device as _device
    from autotune.worker.trainer import Trainer
    from autotune.worker.workloads import get_workload
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29581", rank=0, world_size=1)
    config = Config(threads=threads).to_dict()
    req = WorkerRequest(workload="cnn", config=config, ranks=(RankExpect(
        cpus=None, threads=None, allocator=None, omp_runtime=None, precision="fp32"),))
    setup = _device.decide(config, 0, cuda_available=False, device_count=0)
    spec = get_workload("cnn")
    res = {"warmup_times": [], "step_times": []}
    run = Trainer.build(req, spec, spec.build_model(0), 0, 1, res, _device.autocast(setup), setup)
    for index in range(20):                       # warm caches and oneDNN's primitives
        run.step(index)
    times: dict[bool, list[float]] = {True: [], False: []}
    pattern = [True, False, False, True]          # each side as often first as second
    for k in range(steps):
        on = pattern[k % 4]
        run.clock.enabled = on
        t = time.perf_counter()
        run.step(20 + k)
        times[on].append(time.perf_counter() - t)
    dist.destroy_process_group()
    on, off = times[True], times[False]
    pairs = [a / b for a, b in zip(on, off)]
    rng = random.Random(0)
    boot = sorted(statistics.median(rng.choices(pairs, k=len(pairs))) for _ in range(2000))
    return {"steps_each": len(on), "median_on_ms": statistics.median(on) * 1000,
            "median_off_ms": statistics.median(off) * 1000,
            "ratio_of_medians": statistics.median(on) / statistics.median(off),
            "median_pair_ratio": statistics.median(pairs),
            "pair_ratio_95": [boot[50], boot[1949]]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    if args.steps < 40:
        print("split_timers: error: --steps must be at least 40", file=sys.stderr)
        return 2
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    out = {"machine": describe_machine(fingerprint=True),
           "command": "python3 -m benchmarks.timed.split_timers " + " ".join(argv or sys.argv[1:]),
           **measure(args.steps, args.threads)}
    path = RESULTS / f"split_timers_{time.strftime('%Y-%m-%d')}.json"
    path.write_text(json.dumps(out, indent=1))
    print(json.dumps({k: v for k, v in out.items() if k != "machine"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
