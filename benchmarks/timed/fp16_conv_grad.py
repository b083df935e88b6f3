"""Why fp16 is ruled out on a CPU without amx_fp16 (autotune/plan/feasible.py cpu_precision):
one convolution's weight gradient, and one whole training step of the built-in cnn, timed in
fp32, bf16 and fp16 (autocast, as the worker trains), side by side in rounds on one thread.

    python benchmarks/timed/fp16_conv_grad.py --rounds 5 --out benchmarks/results/fp16_conv_grad.json

On an Intel Xeon with avx512_fp16 and amx_bf16 but no amx_fp16, oneDNN runs an fp16
convolution's weight gradient in its reference kernel ("ref:any" under ONEDNN_VERBOSE=1), so the
cnn's step is tens of times slower in fp16 than in fp32. Each figure is the median over rounds;
the spread is the lowest and highest round.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]   # run by path too: the checkout, before any import of it
sys.path.insert(0, str(ROOT))

from autotune.plan.feasible import cpu_precision  # noqa: E402
from autotune.probe import probe  # noqa: E402
from autotune.worker.workloads import get_workload  # noqa: E402
from benchmarks.timed.machine import describe  # noqa: E402

DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def conv_weight_grad_ms(precision: str) -> float:
    """Forward and weight gradient of one 16-channel 3x3 convolution, batch 32 at 32x32."""
    dtype = DTYPES[precision] or torch.float32
    x = torch.randn(32, 16, 32, 32, dtype=dtype)
    w = torch.randn(16, 16, 3, 3, dtype=dtype, requires_grad=True)
    start = time.perf_counter()
    out = torch.nn.functional.conv2d(x, w, padding=1)
    torch.autograd.grad(out, (w,), torch.ones_like(out))
    return (time.perf_counter() - start) * 1e3


def cnn_step_ms(precision: str, spec, model, batch) -> float:
    """One training step of the built-in cnn under autocast (fp16 with a GradScaler)."""
    x, y = batch
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", enabled=precision == "fp16")
    start = time.perf_counter()
    with torch.autocast("cpu", dtype=DTYPES[precision] or torch.float32,
                        enabled=DTYPES[precision] is not None):
        loss = spec.loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
    return (time.perf_counter() - start) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    spec = get_workload("cnn")
    model = spec.build_model(0)
    batch = spec.make_batch(0, 32, 0)
    for p in DTYPES:                      # warm up every kernel once
        conv_weight_grad_ms(p)
        cnn_step_ms(p, spec, model, batch)
    times: dict[str, dict[str, list[float]]] = {"conv_weight_grad": {}, "cnn_step": {}}
    for _ in range(args.rounds):          # each round: every precision once, side by side
        for p in DTYPES:
            times["conv_weight_grad"].setdefault(p, []).append(conv_weight_grad_ms(p))
            times["cnn_step"].setdefault(p, []).append(cnn_step_ms(p, spec, model, batch))
    topo = probe()
    result = {"machine": describe(fingerprint=True), "torch": torch.__version__,
              "onednn": torch.backends.mkldnn.version() if hasattr(torch.backends.mkldnn,
                                                                    "version") else None,
              "flags": sorted(f for f in topo.isa.flags if "fp16" in f or "bf16" in f),
              "fp16_rule": cpu_precision("fp16", topo), "rounds": args.rounds, "ms": {}}
    for what, by_p in times.items():
        result["ms"][what] = {p: {"median": statistics.median(v), "low": min(v), "high": max(v)}
                              for p, v in by_p.items()}
        fp32 = result["ms"][what]["fp32"]["median"]
        line = ", ".join(f"{p} {s['median']:.1f} ms ({s['low']:.1f}-{s['high']:.1f}; "
                         f"{s['median'] / fp32:.2f}x fp32)" for p, s in result["ms"][what].items())
        print(f"{what}: {line}")
    print(f"fp16 on this CPU: {result['fp16_rule']} (flags: {', '.join(result['flags'])})")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
