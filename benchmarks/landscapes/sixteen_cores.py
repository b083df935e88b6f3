"""What the landscape model predicts for a captured machine (issue 33), to set beside a search.

    python -m benchmarks.landscapes.sixteen_cores tests/fixtures/machines/h200-emr-16c --bandwidth 358.4

Prints, from the model alone (no trial runs): the default launch's and run_cpu's throughput,
and the best configuration with its speedup over both, three ways: over the whole space, without
oneCCL (the GPU machine's kit carries no ccl runtime, so its search ran gloo), and without
oneCCL at the default global batch (a larger batch changes the math and needs its accuracy
confirmed). `benchmarks.replay.at_scale --capture` gives the search's side (trials to 95%).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from autotune.config import Config, changed_knobs
from autotune.search.references import reference_configs

from .model_machines import capture_machine, model_landscape

VIEWS = {
    "any": lambda c: True,
    "gloo": lambda c: c.get("backend") != "ccl",
    "gloo_default_batch": lambda c: c.get("backend") != "ccl"
    and c.get("global_batch") == Config().global_batch,
}


def predict(capture: str, bandwidth_gbs: float) -> dict[str, Any]:
    name, topology, hw = capture_machine(capture, bandwidth_gbs)
    rows = model_landscape(name, topology, hw).rows
    refs = dict(reference_configs(topology, Config()))
    default = rows[refs["reference:default"].key()]["throughput"]
    run_cpu = rows[refs["reference:run_cpu"].key()]["throughput"]
    out: dict[str, Any] = {"default": default, "run_cpu": run_cpu,
                           "run_cpu_config": changed_knobs(refs["reference:run_cpu"])}
    for view, keep in VIEWS.items():
        best = max((r for r in rows.values() if r.get("throughput") and keep(r.get("config") or {})),
                   key=lambda r: r["throughput"])
        out[f"best_{view}"] = {"throughput": best["throughput"],
                               "x_default": best["throughput"] / default,
                               "x_run_cpu": best["throughput"] / run_cpu,
                               "config": changed_knobs(best["config"])}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.landscapes.sixteen_cores", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("capture", help="a folder written by `autotune probe --capture`")
    p.add_argument("--bandwidth", type=float, required=True, metavar="GBS",
                   help="DRAM bandwidth of one NUMA node, GB/s (a capture cannot hold it)")
    args = p.parse_args(argv)
    try:
        print(json.dumps(predict(args.capture, args.bandwidth), indent=1, default=str))
    except ValueError as e:   # not a capture, a bad bandwidth: one line
        print(f"sixteen_cores: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
