"""One rank of benchmarks/timed/backends.py's all-reduce timing: started once per rank with RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT set; rank 0 prints one JSON line.

Both groups (gloo and ccl) live in the same processes, and each size is timed in rounds that
alternate the backends (gloo, ccl, ccl, gloo, ...), so drift on a shared machine hits both alike.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

from autotune.comm import ccl


def time_allreduce(group, tensor: torch.Tensor, iters: int) -> float:
    """Median seconds of one all-reduce over `iters`, after one untimed warm-up."""
    dist.all_reduce(tensor, group=group)
    dist.barrier(group=group)
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        dist.all_reduce(tensor, group=group)
        times.append(time.perf_counter() - start)
    # every rank's slowest view of each call: a collective is as slow as its slowest rank
    t = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return statistics.median(t.tolist())


def main() -> int:
    sizes = [int(s) for s in sys.argv[1].split(",")]
    rounds = int(sys.argv[2])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    ccl.register()
    dist.init_process_group("gloo", rank=rank, world_size=world)
    groups = {"gloo": dist.new_group(backend="gloo"), "ccl": dist.new_group(backend="ccl")}
    out = []
    for size in sizes:
        x = torch.ones(max(1, size // 4))
        iters = max(3, min(200, int(2e8 // max(size, 1))))   # ~ the same bytes per round
        per = {"gloo": [], "ccl": []}
        for r in range(rounds):
            order = ("gloo", "ccl") if r % 2 == 0 else ("ccl", "gloo")
            for name in order:
                per[name].append(time_allreduce(groups[name], x, iters))
        out.append({"bytes": size, "iters": iters, "seconds": per})
    if rank == 0:
        print(json.dumps({"world": world, "sizes": out}), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
