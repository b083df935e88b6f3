"""One rank of the GPU machine's kit test (tests/integration/test_device_kit.py), run by the kit
venv's Python: the ccl backend as scripts/device-run.sh installed it, an all-reduce over the
ranks, and which libccl and libfabric this process mapped. Prints one JSON line."""
from __future__ import annotations

import json
import os

import torch
import torch.distributed as dist

from autotune.comm import ccl

ccl.register()
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("ccl", rank=rank, world_size=world)
t = torch.full((1 << 16,), float(rank + 1))
dist.all_reduce(t)
with open("/proc/self/maps") as f:
    mapped = {line.split()[-1] for line in f if line.rstrip().endswith(".so") or ".so." in line}
libs = sorted(p for p in mapped if "libccl.so" in p or "libfabric" in p or "-fi.so" in p)
print(json.dumps({"sum": t[0].item(), "torch": torch.__version__, "libs": libs}), flush=True)
dist.destroy_process_group()
