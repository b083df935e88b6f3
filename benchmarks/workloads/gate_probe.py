"""A built-in workload seen by the accuracy gate's benchmark (benchmarks/accuracy/gate.py) as an
entry point, with two additions that make a quality run's truth known and its evidence whole:

- `label_noise`: the share of *training* labels replaced by a label drawn at random, seeded by
  (seed, sample index) like the data itself. The held-out set is never touched, so the class
  truly trains worse, by an amount measured over many seeds, and no result is edited.
- the held-out evaluation keeps every example's outcome: on a quality run's last evaluation,
  rank 0 writes which of the `eval_samples` held-out examples the model got right (a bit each)
  to the file named by AUTOTUNE_GATE_DUMP. The benchmark then judges the same runs at any
  held-out size and by per-example agreement (McNemar), offline.

The curve's earlier checkpoints evaluate only the first 512 examples (as cheap as the worker's
own quarter-set checkpoints); the last of a run's `CHECKPOINTS` evaluations takes them all.
"""
from __future__ import annotations

import os
from typing import Any

import torch

from autotune.workloads import get_workload
from autotune.worker.synthetic import _sample_seed
from autotune.worker.workloads import EVAL_SEED, HELD_OUT_START

CHECKPOINTS = 4          # the worker's evaluations per quality run (launch_plan.checkpoints)
EARLY_EXAMPLES = 512
DUMP_ENV = "AUTOTUNE_GATE_DUMP"
PRECISION_ENV = "AUTOTUNE_GATE_PRECISION"   # the run's precision: its evaluation autocasts too


def build(workload: str = "cnn", label_noise: float = 0.0, eval_samples: int = 16384,
          **args: Any):
    spec = get_workload(workload, args)
    make = spec.make_batch
    classes = spec.num_classes

    def make_batch(start: int, count: int, seed: int):
        x, y = make(start, count, seed)
        if label_noise > 0 and start < HELD_OUT_START:
            y = y.clone()
            for j in range(count):
                g = torch.Generator().manual_seed(_sample_seed(seed ^ 0x1AB3, start + j))
                if float(torch.rand((), generator=g)) < label_noise:
                    y[j] = int(torch.randint(classes, (), generator=g))
        return x, y

    calls = [0]

    @torch.no_grad()
    def eval_fn(model: torch.nn.Module) -> float:
        calls[0] += 1
        last = calls[0] % CHECKPOINTS == 0
        n = eval_samples if last else min(EARLY_EXAMPLES, eval_samples)
        hits = _outcomes(model, make, n, spec.input_is_image)
        if last and os.environ.get(DUMP_ENV) and _rank() == 0:
            with open(os.environ[DUMP_ENV], "w", encoding="utf-8") as f:
                f.write(_pack(hits))
        return float(hits.float().mean())

    return type(spec)(**{**spec.__dict__, "make_batch": make_batch, "eval_fn": eval_fn,
                         "eval_samples": eval_samples, "name": f"gate_probe:{workload}"})


def _outcomes(model: torch.nn.Module, make, n: int, image: bool) -> torch.Tensor:
    was = model.training
    model.eval()
    bf16 = os.environ.get(PRECISION_ENV) == "bf16"
    out = []
    for start in range(0, n, 256):
        x, y = make(HELD_OUT_START + start, min(256, n - start), EVAL_SEED)
        if image:
            x = x.contiguous(memory_format=torch.channels_last) if _channels_last(model) else x
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out.append(model(x).argmax(dim=1) == y)
    model.train(was)
    return torch.cat(out)


def _channels_last(model: torch.nn.Module) -> bool:
    p = next((p for p in model.parameters() if p.dim() == 4), None)
    return p is not None and p.is_contiguous(memory_format=torch.channels_last) \
        and not p.is_contiguous()


def _rank() -> int:
    import torch.distributed as dist
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def _pack(hits: torch.Tensor) -> str:
    """Hex of the outcomes, 8 examples a byte, first example in the lowest bit."""
    bits = hits.to(torch.uint8).tolist()
    data = bytearray((len(bits) + 7) // 8)
    for i, b in enumerate(bits):
        data[i // 8] |= b << (i % 8)
    return f"{len(bits)}:{data.hex()}"


def unpack(text: str) -> list[bool]:
    n, _, hexed = text.partition(":")
    data = bytes.fromhex(hexed)
    return [bool(data[i // 8] >> (i % 8) & 1) for i in range(int(n))]
