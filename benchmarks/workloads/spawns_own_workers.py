"""A DDP script that starts its own workers with torch.multiprocessing.spawn (no torchrun).

    python spawns_own_workers.py --world-size 2

Launched once, it trains on `--world-size` processes it starts itself, then prints (rank 0)
`Training time: 1.234 s`. A launcher that also started N copies of it would run N x world-size
processes on the same cores; autotune must launch it once.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def worker(rank: int, world: int, steps: int) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        x, y = torch.randn(64, 128, generator=g), torch.randint(10, (64,), generator=g)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    if rank == 0:
        print(f"Training time: {time.perf_counter() - start:.3f} s", flush=True)
    # gloo can deadlock in destroy_process_group() / teardown with a DDP model alive
    dist.barrier()
    os._exit(0)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    mp.spawn(worker, args=(args.world_size, args.steps), nprocs=args.world_size)


if __name__ == "__main__":
    main()
