"""A small GPT-style training script whose launch takes ~15 s before its first step, as nanoGPT's
does on a CPU (imports, data preparation, model build), tuned through --metric (issue 62: rounds
before breadth when trials are slow; no window of a script's launch can be kept).

    python slow_start_gpt.py --batch-size 8 --start-delay 15
    torchrun --nproc-per-node 2 slow_start_gpt.py --batch-size 8
    autotune search --budget 4m --metric 'throughput: ([0-9.]+) samples/s' -- \\
        python benchmarks/workloads/slow_start_gpt.py --batch-size {batch_size}

The start-up is a sleep (`--start-delay`, seconds, before anything else) plus building a
4-layer, 128-wide causal transformer over random tokens of a 256-symbol vocabulary; it then
trains `--steps` steps and prints `throughput: N samples/s` (global, rank 0) every few steps.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int, width: int, layers: int, heads: int, context: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.head = nn.Linear(width, vocab)
        self.register_buffer("mask", torch.triu(torch.ones(context, context, dtype=torch.bool), 1))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x, self.mask[:idx.shape[1], :idx.shape[1]])
        return self.head(x)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, default=8, help="sequences per process and step")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--start-delay", type=float, default=15.0,
                   help="seconds the launch takes before anything (nanoGPT's start on a CPU)")
    p.add_argument("--report-every", type=int, default=5)
    args = p.parse_args()
    time.sleep(args.start_delay)

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("gloo", init_method="env://")
    torch.manual_seed(0)
    model = TinyGPT(vocab=256, width=128, layers=4, heads=4, context=args.context)
    if world > 1:
        model = DDP(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    g = torch.Generator().manual_seed(rank)
    t0, done = time.perf_counter(), 0
    for step in range(1, args.steps + 1):
        idx = torch.randint(256, (args.batch_size, args.context + 1), generator=g)
        logits = model(idx[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, 256), idx[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        done += args.batch_size * world
        if step % args.report_every == 0:
            now = time.perf_counter()
            if rank == 0:
                print(f"step {step} throughput: {done / (now - t0):.1f} samples/s", flush=True)
            t0, done = now, 0
    if world > 1:   # as plain_ddp.py: gloo may hang in teardown with a DDP model alive
        dist.barrier()
        os._exit(0)


if __name__ == "__main__":
    main()
