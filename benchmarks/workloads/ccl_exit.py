"""A DDP script over ccl that ends the way users' scripts end (benchmarks/timed/ccl_exit_aborts.py).

    python ccl_exit.py --exit STYLE     (ranks started as torchrun would: RANK, WORLD_SIZE, ...)

Unlike autotune's own worker, which leaves with os._exit, a script leaves through Python's
interpreter teardown, where a oneCCL progress thread that still releases a Python-owned tensor
aborts the process. Each STYLE leaves a different amount of ccl work alive at that moment:

  destroy          del the DDP model, then destroy_process_group() (the documented way)
  keep             just return: the model, the group and the communicator live into teardown
  final_allreduce  one more all-reduce (a loss averaged for the log), then return
  async_unwaited   an all-reduce started with async_op=True and never waited for, then return
  async_logged     the last loss is averaged asynchronously and printed by a callback on its
                   future (`.then`), after rank 0 spent --skew-s on work of its own (a checkpoint,
                   an evaluation): rank 1 returns first, and its callback runs while its
                   interpreter is being torn down
"""
import argparse
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

STYLES = ("destroy", "keep", "final_allreduce", "async_unwaited", "async_logged")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--exit", choices=STYLES, required=True, dest="style")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--skew-s", type=float, default=0.5,
                   help="async_logged: rank 0's own work before the last all-reduce")
    args = p.parse_args()
    import oneccl_bindings_for_pytorch  # noqa: F401 - registers "ccl" (autotune's stand-in on PYTHONPATH)
    dist.init_process_group("ccl")
    rank = dist.get_rank()
    model = DDP(torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 10)), bucket_cap_mb=0.25)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(rank)
    # A fixed number of steps: every rank runs the same collectives in the same order.
    start = time.perf_counter()
    for _ in range(args.steps):
        x, y = torch.randn(32, 256, generator=g), torch.randint(0, 10, (32,), generator=g)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    rate = args.steps * 32 * dist.get_world_size() / (time.perf_counter() - start)
    print(f"samples/s: {rate:.1f}", flush=True)
    if args.style == "destroy":
        del model, opt
        dist.destroy_process_group()
    elif args.style == "final_allreduce":
        loss = torch.tensor([float(rank)])
        dist.all_reduce(loss)
    elif args.style == "async_unwaited":
        global pending   # a module global: the tensor lives into interpreter teardown
        pending = torch.ones(1 << 20)
        dist.all_reduce(pending, async_op=True)
    elif args.style == "async_logged":
        if rank == 0:
            time.sleep(args.skew_s)
        global last_loss, logged
        last_loss = torch.tensor([float(rank)])
        logged = dist.all_reduce(last_loss, async_op=True).get_future().then(
            lambda fut: print(f"mean loss {fut.value()[0].item() / 2:.3f}", flush=True))


if __name__ == "__main__":
    main()
