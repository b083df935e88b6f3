"""A training script written for Intel's bindings, as the book's chapter 9 scripts and Intel's
examples are: `import oneccl_bindings_for_pytorch` registers "ccl", then plain DDP. autotune
runs it unmodified (tests/integration/test_ccl.py)."""
import time

import torch
import torch.distributed as dist
import oneccl_bindings_for_pytorch  # noqa: F401 - registers the "ccl" backend
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("ccl")
rank = dist.get_rank()
model = DDP(torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
# A fixed number of steps: every rank must run the same collectives in the same order. (A loop
# that ran for 2 s let one rank take a step more than the other under load; its DDP all-reduce then
# met the other's final MAX all-reduce below, and both waited for ever, 2 launches in 10.)
steps, start = 60, time.perf_counter()
for _ in range(steps):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(torch.randn(32, 256)), torch.randint(0, 10, (32,))).backward()
    opt.step()
w = model.module[0].weight.detach().clone()
dist.all_reduce(w, op=dist.ReduceOp.MAX)          # every rank holds the same weights
print(f"rank {rank}: backend {dist.get_backend()} provider "
      f"{getattr(oneccl_bindings_for_pytorch, 'provider', 'intel')} in sync "
      f"{torch.equal(w, model.module[0].weight)}", flush=True)
print(f"samples/s: {steps * 32 * dist.get_world_size() / (time.perf_counter() - start):.1f}", flush=True)
del model
dist.destroy_process_group()
