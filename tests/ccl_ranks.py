"""One rank of the ccl backend tests (tests/integration/test_ccl.py), started as a real process
per rank: `python ccl_ranks.py MODE` with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set.

Every rank holds two process groups over the same ranks, gloo and ccl, runs the same inputs
through both and prints one JSON line: what differed (nothing, when ccl is right).

MODE:
  collectives  every collective x dtype, ccl against gloo (or against the exact answer where
               gloo has no such op: AVG)
  ddp          the same seeded model trained by DDP over each group: parameters must agree
  die          rank 1 kills itself in the middle of a stream of all-reduces; the others must
               fail with a clear error within the group's timeout (AUTOTUNE_TEST_TIMEOUT_S)
"""
from __future__ import annotations

import datetime
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

from autotune.comm import ccl

DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int8, torch.uint8,
          torch.int16, torch.int32, torch.int64)
OPS = {"SUM": dist.ReduceOp.SUM, "MIN": dist.ReduceOp.MIN, "MAX": dist.ReduceOp.MAX,
       "PRODUCT": dist.ReduceOp.PRODUCT}


def data(rank: int, n: int, dtype: torch.dtype, salt: int = 0) -> torch.Tensor:
    """Small values per rank, so products and sums stay exact in every dtype (int8 included)."""
    g = torch.Generator().manual_seed(1000 * rank + salt)
    base = torch.randint(1, 4, (n,), generator=g)
    return base.to(dtype)


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype.is_floating_point:
        return torch.allclose(a.double(), b.double(), rtol=1e-2 if a.element_size() < 4 else 1e-6)
    return torch.equal(a, b)


def exact(world: int, n: int, dtype: torch.dtype, op: str, salt: int = 0) -> torch.Tensor:
    """The reduction of every rank's data, computed here (every rank's data is known)."""
    parts = torch.stack([data(r, n, dtype, salt).double() for r in range(world)])
    value = {"SUM": parts.sum(0), "MIN": parts.min(0).values, "MAX": parts.max(0).values,
             "PRODUCT": parts.prod(0)}[op]
    return value.to(dtype)


def collectives(rank: int, world: int, gloo, cc) -> list[str]:
    bad = []
    for dtype in DTYPES:
        name = str(dtype).replace("torch.", "")
        for op_name, op in OPS.items():
            ref, got = data(rank, 257, dtype), data(rank, 257, dtype)
            try:
                dist.all_reduce(ref, op=op, group=gloo)
            except RuntimeError:   # gloo lacks some dtypes (bf16, int16...): the exact answer
                ref = exact(world, 257, dtype, op_name)
            dist.all_reduce(got, op=op, group=cc)
            if not same(ref, got) or not same(exact(world, 257, dtype, op_name), got):
                bad.append(f"all_reduce {op_name} {name}")
        got = data(rank, 64, dtype)
        dist.all_reduce(got, op=dist.ReduceOp.AVG, group=cc)   # gloo has no AVG: exact answer
        total = sum(data(r, 64, dtype).double() for r in range(world))
        want = (total / world) if dtype.is_floating_point else torch.trunc(total / world)
        if not torch.allclose(got.double(), want, rtol=1e-2):
            bad.append(f"all_reduce AVG {name}")
        bad += _moves(rank, world, gloo, cc, dtype, name)
    bad += asynchronous(world, cc)
    return bad


def asynchronous(world: int, cc) -> list[str]:
    """A collective returns before it is done (it runs on the group's progress thread), so the
    caller computes meanwhile, as DDP's backward does between buckets; its future completes."""
    big = torch.ones(4 << 20)                       # 16 MB: milliseconds of work on any machine
    work = dist.all_reduce(big, group=cc, async_op=True)
    returned_early = not work.is_completed()
    busy = torch.randn(256, 256) @ torch.randn(256, 256)   # the caller's own compute, meanwhile
    fut = work.get_future()
    work.wait()
    ok = returned_early and fut.done() and busy.shape == (256, 256) and bool(torch.all(big == world))
    return [] if ok else [f"async: returned early {returned_early}, future done {fut.done()}"]


def gloo_or(fn, fallback):
    """gloo's answer, or `fallback()` for a dtype gloo cannot move."""
    try:
        return fn()
    except RuntimeError:
        return fallback()


def _moves(rank: int, world: int, gloo, cc, dtype: torch.dtype, name: str) -> list[str]:
    """Broadcast, the all-gathers, the reduce-scatters and all-to-all, one dtype; each against
    gloo where gloo has the op and dtype, else against the exact answer."""
    bad = []
    got = data(rank, 33, dtype, 1)
    dist.broadcast(got, 1, group=cc)
    ref = gloo_or(lambda: _run(dist.broadcast, data(rank, 33, dtype, 1), 1, group=gloo),
                  lambda: data(1, 33, dtype, 1))
    bad += [] if same(ref, got) and same(data(1, 33, dtype, 1), got) else [f"broadcast {name}"]
    x = data(rank, 10, dtype, 2)
    every = [data(r, 10, dtype, 2) for r in range(world)]
    got = [torch.zeros_like(x) for _ in range(world)]
    dist.all_gather(got, x, group=cc)
    ref = gloo_or(lambda: _gather_list(x, world, gloo), lambda: every)
    bad += [] if all(same(a, b) and same(a, c) for a, b, c in zip(ref, got, every)) else [f"all_gather {name}"]
    got = torch.zeros(world * 10, dtype=dtype)
    dist.all_gather_into_tensor(got, x, group=cc)
    bad += [] if same(torch.cat(every), got) else [f"all_gather_into_tensor {name}"]
    # gloo has no reduce_scatter: the exact answer is the sum of every rank's slice
    big = data(rank, world * 6, dtype, 3)
    want = exact(world, world * 6, dtype, "SUM", 3).view(world, 6)[rank]
    out = torch.zeros(6, dtype=dtype)
    dist.reduce_scatter_tensor(out, big, group=cc)
    bad += [] if same(want, out) else [f"reduce_scatter_tensor {name}"]
    out = torch.zeros(6, dtype=dtype)
    dist.reduce_scatter(out, list(big.view(world, 6)), group=cc)
    bad += [] if same(want, out) else [f"reduce_scatter {name}"]
    src = data(rank, world * 4, dtype, 4)
    mine = torch.cat([data(r, world * 4, dtype, 4).view(world, 4)[rank] for r in range(world)])
    got = torch.zeros_like(src)
    dist.all_to_all_single(got, src, group=cc)
    ref = gloo_or(lambda: _run(dist.all_to_all_single, torch.zeros_like(src), src, group=gloo),
                  lambda: mine)
    bad += [] if same(ref, got) and same(mine, got) else [f"all_to_all_single {name}"]
    ins = list(src.view(world, 4))
    got = [torch.zeros(4, dtype=dtype) for _ in range(world)]
    dist.all_to_all(got, ins, group=cc)
    bad += [] if same(torch.cat(got), mine) else [f"all_to_all {name}"]
    dist.barrier(group=cc)
    return bad


def _run(op, tensor, *args, **kwargs) -> torch.Tensor:
    op(tensor, *args, **kwargs)
    return tensor


def _gather_list(x, world, group):
    out = [torch.zeros_like(x) for _ in range(world)]
    dist.all_gather(out, x, group=group)
    return out


def ddp(rank: int, world: int, gloo, cc) -> list[str]:
    """Same seed, same batches, one model per group: ccl and gloo must train to the same weights."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    params = {}
    for name, group in (("gloo", gloo), ("ccl", cc)):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
        # small buckets: several all-reduces in flight while backward still runs
        wrapped = DDP(model, process_group=group, bucket_cap_mb=0.05)
        opt = torch.optim.SGD(wrapped.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(rank)
        for _ in range(20):
            x, y = torch.randn(16, 64, generator=g), torch.randint(0, 10, (16,), generator=g)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(wrapped(x), y).backward()
            opt.step()
        params[name] = [p.detach().clone() for p in model.parameters()]
        del wrapped, opt    # free DDP before its group goes (gloo can hang in teardown otherwise)
    diff = max((a - b).abs().max().item() for a, b in zip(params["gloo"], params["ccl"]))
    return [] if diff < 1e-5 else [f"ddp parameters differ by {diff:.3g}"]


def die(rank: int, world: int, cc) -> list[str]:
    x = torch.ones(1 << 16)
    for step in range(10_000):
        if rank == 1 and step == 20:
            os.kill(os.getpid(), signal.SIGKILL)   # dies with all-reduces of the others in flight
        dist.all_reduce(x, group=cc)
    return ["the all-reduces went on after rank 1 died"]


def main() -> int:
    mode = sys.argv[1]
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    timeout = datetime.timedelta(seconds=float(os.environ.get("AUTOTUNE_TEST_TIMEOUT_S", "120")))
    provider = ccl.register()
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)
    cc = dist.new_group(backend="ccl", timeout=timeout)
    gloo = dist.new_group(backend="gloo", timeout=timeout)
    started = time.monotonic()
    try:
        if mode == "collectives":
            bad = collectives(rank, world, gloo, cc)
        elif mode == "ddp":
            bad = ddp(rank, world, gloo, cc)
        else:
            bad = die(rank, world, cc)
    except Exception as exc:  # noqa: BLE001 - the test reads what the rank saw
        print(json.dumps({"rank": rank, "error": f"{type(exc).__name__}: {exc}",
                          "after_s": round(time.monotonic() - started, 2)}), flush=True)
        return 3
    print(json.dumps({"rank": rank, "provider": provider, "bad": bad,
                      "backend": dist.get_backend(cc)}), flush=True)
    dist.barrier(group=gloo)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
