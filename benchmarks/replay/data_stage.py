"""A simulated data-bound GPU machine, and whether the guide finds its feed first (issue 43).

The machine is the committed H200 capture (tests/fixtures/machines/h200-emr-16c: 16 Xeon cores,
one GPU) with the real GPU space resolved on it. Its landscape comes from a model of a step with
a data stage, calibrated on what the GPU machine measured for torchvision's resnet50 with the
built-in augmented pipeline (issue 43, 2026-11-27, an H100 beside the same 16 cores):

  compute     the step with its batches resident (the ceiling): 1546 samples/s in fp32 at batch
              32, 1738 in bf16 with channels_last, 3769 at batch 128; other mixes in between
  in-process  no DataLoader workers: the rank makes each batch, copies it, then computes it, one
              after the other: the default launch's 339 samples/s gives 2.21 ms of data a sample
  workers     W processes each make a batch in a + b x B seconds, in parallel with the step:
              4 workers with pinned memory ran 2.59x the default at batch 32 and 4.97x with
              bf16, channels_last and batch 128, which fixes a = 93 ms and b = 1.65 ms
  copy        the batch to the GPU: 0.10 ms a sample from pageable memory, 0.025 pinned

Every trial carries the split the model gives (waiting for data, copy, compute), so the real
search loop's guide reads it as it reads a worker's. Each variant is replayed by the real search
on the same table: "split" (the guide sees where the step goes), "blind" (the same table without
splits: the guide of before). Counted: trials, the references included, until the search has
measured 95% of the table's best, median over seeds. A model, not a measurement.

    python3 -m benchmarks.replay.data_stage --seeds 10
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import statistics
import sys

from autotune.config import Config
from autotune.plan.feasible import ruled_out
from autotune.probe import probe
from autotune.probe.topology import Capabilities, Topology
from autotune.result import Outcome
from autotune.search.references import reference_configs
from autotune.space.resolve import find_space, load_space, resolve

from benchmarks import RESULTS, ROOT
from benchmarks.landscapes.table import SCHEMA, Landscape, math_key

CAPTURE = ROOT / "tests" / "fixtures" / "machines" / "h200-emr-16c"

CEILING = {("fp32", False): 1546.0, ("fp32", True): 1500.0, ("bf16", False): 1650.0,
           ("bf16", True): 1738.0, ("fp16", False): 1650.0, ("fp16", True): 1738.0}
BATCH_GAIN = {32: 1.0, 64: 1.55, 128: 3769.0 / 1738.0}
COPY_S = {False: 0.00010, True: 0.000025}    # per sample, pageable / pinned
IN_PROCESS_S = 1 / 339.0 - 1 / 1546.0 - COPY_S[False]   # data per sample the rank makes itself
WORKER_A_S, WORKER_B_S = 0.093, 0.00165      # a worker's batch: a + b x B seconds
WINDOW_S, START_S = 5.0, 13.0                # a trial's window and its start (the GPU machine's)


def machine() -> Topology:
    t = probe(str(CAPTURE), collect_capabilities=False)
    return dataclasses.replace(t, capabilities=Capabilities(
        backends=("gloo", "nccl"), numactl=True, numactl_membind=True, taskset=True, cuda=True))


def step(c: Config) -> tuple[float, dict[str, float]]:
    """(samples/s, seconds per step by phase) of one configuration in the model."""
    b = c.global_batch
    compute = b / (CEILING[(c.precision, c.channels_last)] * BATCH_GAIN[b])
    copy_s = b * COPY_S[c.pin_memory]
    if c.dataloader_workers == 0:
        data = b * IN_PROCESS_S
    else:   # workers make batches while the step runs; the step waits for what they lag
        made = (WORKER_A_S + WORKER_B_S * b) / c.dataloader_workers
        data = max(0.0, made - compute - copy_s)
    total = data + copy_s + compute
    return b / total, {"data": data, "copy": copy_s, "compute": compute}


def landscape() -> Landscape:
    topology = machine()
    space = resolve(load_space(find_space("gpu")), topology)
    land = Landscape({"schema": SCHEMA, "fingerprint": "model-h200-data-stage",
                      "topology": topology.to_json(), "space": space.to_json(),
                      "library_versions": {}, "workload": "model:resnet50",
                      "target_seconds": WINDOW_S, "rows": {}, "accuracy": {}, "synthetic": True})
    verdicts: dict[tuple, str | None] = {}
    configs = [(role, c) for role, c in reference_configs(topology, Config(device="cuda",
                                                                           backend="nccl"))]
    configs += [("grid", space.to_config(p)) for p in space.grid()]
    for role, c in configs:
        lay = (c.threads, c.numa_binding, c.binding, c.backend, c.precision,
               c.dataloader_workers, c.pin_memory, c.global_batch)
        if lay not in verdicts:
            verdicts[lay] = ruled_out(c, space, topology)
        if verdicts[lay]:
            land.rows[c.key()] = {"config": c.to_dict(), "outcome": Outcome.INFEASIBLE,
                                  "reason": verdicts[lay], "throughput": None, "seconds": 0.0}
            continue
        thr, phases = step(c)
        step_s = c.global_batch / thr
        land.rows[c.key()] = {"config": c.to_dict(), "role": role, "outcome": Outcome.OK,
                              "throughput": thr, "seconds": START_S + WINDOW_S,
                              "split": {"step_s": step_s, "source": "model", **phases}}
        land.accuracy.setdefault(math_key(c), {"outcome": Outcome.OK, "seconds": 30.0,
                                               "accuracy": 0.9 - 0.0005 * (c.global_batch // 32)})
    return land


def blind(land: Landscape) -> Landscape:
    """The same table with no splits: what the guide saw before it read them."""
    data = copy.deepcopy(land.data)
    for row in data["rows"].values():
        row.pop("split", None)
    return Landscape(data)


def trials_to(land: Landscape, seeds: int, share: float = 0.95) -> dict:
    from .efficiency import run_autotune
    best, _ = land.oracle(1.0)
    runs = [run_autotune(land, seed, best, 1.0, budget_s=450.0) for seed in range(seeds)]
    key = f"trials_{round(share * 100)}"
    counts = [r.get(key) for r in runs]
    done = [n for n in counts if n is not None and n != float("inf")]
    return {"best": best, "trials": counts,
            "median": statistics.median(done) if len(done) == len(counts) else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=10)
    args = p.parse_args(argv)
    if args.seeds < 1:
        print("data_stage: error: --seeds must be at least 1", file=sys.stderr)
        return 2
    land = landscape()
    default = land.rows[Config(device="cuda", backend="nccl").key()]
    out = {"model": "benchmarks/replay/data_stage.py (calibrated on the GPU machine's resnet50)",
           "command": "python3 -m benchmarks.replay.data_stage " + " ".join(argv or sys.argv[1:]),
           "default_throughput": default["throughput"],
           "split": trials_to(land, args.seeds), "blind": trials_to(blind(land), args.seeds)}
    (RESULTS / "data_stage.json").write_text(json.dumps(out, indent=1))
    for name in ("split", "blind"):
        r = out[name]
        print(f"{name:>5}: trials to 95% of the best ({r['best']:.0f} samples/s, "
              f"{r['best'] / out['default_throughput']:.1f}x the default): median {r['median']}, "
              f"per seed {r['trials']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
