"""The landscape model held out between two machines (issue 45): fit it on one machine's
recorded landscape, predict the other's, commit the prediction, and only then compare.

    python -m benchmarks.landscapes.two_machines predict --fit FP=FILE --target FP=FILE --out PRED.json
    git add PRED.json && git commit -m "..."               # before any comparison
    python -m benchmarks.landscapes.two_machines compare PRED.json --target FP=FILE [--out RESULT.json]

`predict` fits benchmarks/landscapes/model.py to the first file (model_machines.calibrate, on
every parameter that file can identify: fit_grids) and reads of the target only what its capture
and the recorder's plan say: its topology and which configurations it holds, never a throughput
or an accuracy. Whether a math class passes the accuracy gate is predicted from the FIT
machine's quality runs: the same workload computes the same thing on any machine. It predicts
each configuration's speedup over the target's default launch, the best of each class (layout:
1 rank or several per NUMA node; backend; precision; global batch), the best configuration
within the gate, and which layout class wins. `compare` refuses a prediction that git does not
hold unchanged (the earlier 16-core prediction was committed before its run: docs/benchmarks.md),
then sets the target's measurements beside it. Files are named as checks.py says, and
refused there when from another machine or missing a class.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from autotune.config import Config, changed_knobs
from autotune.result import Outcome

from .table import Landscape
from .checks import LandscapeRefused, layout_class, load_checked, nodes_of, told
from .model import Hardware, Params, throughput
from .model_machines import CALIBRATION_GRIDS, CALIBRATION_HW, calibrate, fit_report

# Machines whose memory bandwidth per node the model knows without being told: the 2-core VMs.
KNOWN_HARDWARE = {fp: CALIBRATION_HW for fp in ("115e441fefef", "d0a564b09095", "7cdbdc5b4fd3")}
TARGET_PCT = 15.0     # issue 45: the other machine's best speedup within 15%
# Parameters only a machine with more than two cores, or with oneCCL, identifies.
WIDE_GRIDS = {"serial": [x / 200 for x in range(0, 21)],
              "gloo_alpha_s": [x * 1e-5 for x in (1, 3, 10, 30, 100, 300, 1000)],
              "ccl_alpha_s": [x * 1e-6 for x in (1, 4, 10, 40, 100, 400)],
              "amx_bf16_gain": [0.8 + x / 10 for x in range(0, 23)],
              "intel_omp_gain": [0.9 + x / 20 for x in range(0, 20)]}


def classes(config: Config, nodes: int) -> dict[str, str]:
    return {"layout": layout_class(config, nodes), "backend": config.backend,
            "precision": config.precision, "batch": str(config.global_batch)}


def hardware_of(land: Landscape, fp: str, bandwidths: dict[str, float]) -> Hardware:
    """The figures the model needs beside a capture: told (--bandwidth FP=GBS), recorded with
    the landscape (many_cores --bandwidth), or known (the 2-core VMs)."""
    rec = land.data.get("hardware") or {}
    if fp in bandwidths or rec.get("node_bandwidth_gbs"):
        return Hardware(name=fp, node_bandwidth_gbs=bandwidths.get(fp) or rec["node_bandwidth_gbs"],
                        vcpus_share_cores=bool(rec.get("vcpus_share_cores", False)))
    if fp in KNOWN_HARDWARE:
        return KNOWN_HARDWARE[fp]
    raise LandscapeRefused(f"machine {fp}: the model needs its DRAM bandwidth per NUMA node, "
                           f"which no capture holds: --bandwidth {fp}=GBS")


def fit_grids(land: Landscape) -> tuple[dict[str, list[float]], tuple[str, ...]]:
    """The parameters this landscape can identify (those its measured configurations vary)."""
    ok = [Config.from_dict(r["config"]) for r in land.rows.values()
          if r.get("outcome") == Outcome.OK and r.get("throughput")]
    topology = land.topology()
    intel = topology.isa.vendor == "intel"
    g = {k: CALIBRATION_GRIDS[k] for k in ("sample_s", "fixed_s", "taskset", "numactl")}
    if any(c.precision != "fp32" for c in ok):
        name = "amx_bf16_gain" if "amx_bf16" in topology.isa.flags else "bf16_gain"
        g[name] = WIDE_GRIDS.get(name) or CALIBRATION_GRIDS[name]
    if any(c.omp_runtime == "libiomp5" for c in ok):
        g["intel_omp_gain" if intel else "libiomp5"] = (WIDE_GRIDS["intel_omp_gain"] if intel
                                                        else CALIBRATION_GRIDS["libiomp5"])
    if len(topology.usable_cores()) <= 2:       # the VMs' two vCPUs, taken as SMT siblings
        g["sibling_gain"] = CALIBRATION_GRIDS["sibling_gain"]
    if len({c.nproc for c in ok if c.nproc > 1}) > 1:
        g.update(serial=WIDE_GRIDS["serial"], gloo_alpha_s=WIDE_GRIDS["gloo_alpha_s"])
    if any(c.backend == "ccl" for c in ok):
        g["ccl_alpha_s"] = WIDE_GRIDS["ccl_alpha_s"]
    allocators = tuple(sorted({c.allocator for c in ok} - {"default"}))
    return g, allocators


def fit(land: Landscape, hw: Hardware, rounds: int = 3) -> Params:
    grids, allocators = fit_grids(land)
    return calibrate(land, Params(), rounds=rounds, hw=hw, grids=grids, allocators=allocators)


def _best(values: list[tuple[Config, float]], nodes: int) -> dict[str, dict[str, Any]]:
    """The best speedup of each class value, with its configuration."""
    out: dict[str, dict[str, Any]] = {}
    for config, x in values:
        for dim, value in classes(config, nodes).items():
            have = out.setdefault(dim, {}).get(value)
            if have is None or x > have["x"]:
                out[dim][value] = {"x": x, "config": changed_knobs(config)}
    return out


def _summary(values: list[tuple[Config, float]], gated: list[tuple[Config, float]],
             nodes: int) -> dict[str, Any]:
    best = max(gated, key=lambda cx: cx[1], default=None)
    layouts = _best(gated, nodes).get("layout", {})
    return {"classes": _best(values, nodes),
            "best": {"x": best[1], "config": changed_knobs(best[0])} if best else None,
            "layout_winner": max(layouts, key=lambda k: layouts[k]["x"]) if layouts else None,
            "gated_layouts": layouts}


def predict(fit_spec: str, target_spec: str, *, bandwidths: dict[str, float],
            rounds: int = 3, max_drop: float = 1.0) -> dict[str, Any]:
    fit_land, fit_fp = load_checked(fit_spec)
    target, target_fp = load_checked(target_spec)
    fit_hw, target_hw = hardware_of(fit_land, fit_fp, bandwidths), hardware_of(target, target_fp, bandwidths)
    params = fit(fit_land, fit_hw, rounds)
    topology, nodes = target.topology(), nodes_of(target)
    configs = [Config.from_dict(r["config"]) for r in target.rows.values()
               if r.get("outcome") != Outcome.INFEASIBLE]     # what was planned, not measured
    base = throughput(Config(), topology, target_hw, params)
    values = [(c, throughput(c, topology, target_hw, params) / base) for c in configs]
    gated = [(c, x) for c, x in values if fit_land.feasible_within(c, max_drop)]
    return {"fit": {"fingerprint": fit_fp, "file": str(told(fit_spec)[1]),
                    "hardware": dataclasses.asdict(fit_hw), "params": dataclasses.asdict(params),
                    "fit": fit_report(fit_land, params, fit_hw)},
            "target": {"fingerprint": target_fp, "hardware": dataclasses.asdict(target_hw),
                       "configs": sorted(c.key() for c in configs)},
            "max_accuracy_drop": max_drop,
            "per_config": {c.key(): x for c, x in values}, **_summary(values, gated, nodes)}


def measured(target: Landscape, max_drop: float) -> dict[str, Any]:
    default = target.rows[Config().key()]["throughput"]
    values = [(Config.from_dict(r["config"]), r.get("x_default") or r["throughput"] / default)
              for r in target.rows.values() if r.get("outcome") == Outcome.OK and r.get("throughput")]
    gated = [(c, x) for c, x in values if target.feasible_within(c, max_drop)]
    return {"per_config": {c.key(): x for c, x in values},
            **_summary(values, gated, nodes_of(target))}


def not_committed(path: Path) -> str | None:
    """Why git does not hold `path` as it is now (None: it does, unchanged)."""
    where = ["git", "-C", str(path.resolve().parent)]
    name = path.resolve().name
    if subprocess.run([*where, "ls-files", "--error-unmatch", name], capture_output=True).returncode:
        return "it is not committed"
    if subprocess.run([*where, "diff", "--quiet", "HEAD", "--", name], capture_output=True).returncode:
        return "it differs from its committed version"
    return None


def compare(pred_path: Path, target_spec: str) -> dict[str, Any]:
    why = not_committed(pred_path)
    if why:
        raise LandscapeRefused(f"{pred_path}: {why}; commit the prediction before comparing "
                               f"(git add {pred_path} && git commit), so the comparison cannot change it")
    pred = json.loads(pred_path.read_text())
    target, fp = load_checked(target_spec)
    if fp != pred["target"]["fingerprint"]:
        raise LandscapeRefused(f"{target_spec}: machine {fp}, but the prediction is for "
                               f"{pred['target']['fingerprint']}")
    meas = measured(target, pred["max_accuracy_drop"])
    rows = []
    for dim, values in pred["classes"].items():
        for value, p in values.items():
            m = meas["classes"].get(dim, {}).get(value)
            rows.append({"class": f"{dim}: {value}", "predicted": p, "measured": m,
                         "error_pct": (p["x"] / m["x"] - 1) * 100 if m else None})
    pb, mb = pred["best"], meas["best"]
    best = {"predicted": pb, "measured": mb,
            "error_pct": (pb["x"] / mb["x"] - 1) * 100 if pb and mb else None,
            "predicted_config_measured_x": meas["per_config"].get(
                Config().with_(**pb["config"]).key()) if pb else None}
    best["within_target"] = best["error_pct"] is not None and abs(best["error_pct"]) <= TARGET_PCT
    return {"prediction": str(pred_path), "prediction_sha256": hashlib.sha256(
                pred_path.read_bytes()).hexdigest(), "fit": pred["fit"]["fingerprint"],
            "target": fp, "classes": rows, "best": best,
            "layout_winner": {"predicted": pred["layout_winner"], "measured": meas["layout_winner"],
                              "right": pred["layout_winner"] == meas["layout_winner"]}}


def _x(v: dict[str, Any] | None) -> str:
    return f"{v['x']:.2f}x ({' '.join(f'{k}={x}' for k, x in v['config'].items()) or 'default'})" \
        if v else "not measured"


def markdown(result: dict[str, Any]) -> str:
    lines = [f"fit on {result['fit']}, predicting {result['target']} "
             f"(prediction {result['prediction']}, sha256 {result['prediction_sha256'][:12]})", "",
             "| class | predicted (best of the class) | measured | error |", "|---|---|---|---|"]
    for r in result["classes"]:
        err = f"{r['error_pct']:+.0f}%" if r["error_pct"] is not None else "-"
        lines.append(f"| {r['class']} | {_x(r['predicted'])} | {_x(r['measured'])} | {err} |")
    b, w = result["best"], result["layout_winner"]
    err = f"{b['error_pct']:+.0f}%" if b["error_pct"] is not None else "-"
    lines += ["", f"best within the accuracy gate: predicted {_x(b['predicted'])}, measured "
              f"{_x(b['measured'])}: {err} ({'within' if b['within_target'] else 'NOT within'} "
              f"{TARGET_PCT:g}%); the predicted best measured "
              + (f"{b['predicted_config_measured_x']:.2f}x" if b["predicted_config_measured_x"]
                 else "nothing (not in the landscape)"),
              f"layout class that wins: predicted {w['predicted']}, measured {w['measured']} "
              f"({'right' if w['right'] else 'WRONG'})"]
    return "\n".join(lines)


def parse_bandwidths(items: list[str]) -> dict[str, float]:
    out = {}
    for item in items:
        fp, _, gbs = item.partition("=")
        try:
            out[fp] = float(gbs)
        except ValueError:
            raise LandscapeRefused(f"--bandwidth {item}: give FINGERPRINT=GBS, e.g. "
                                   "abcdef012345=358.4") from None
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.landscapes.two_machines", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    pr = sub.add_parser("predict", help="fit on one landscape, predict the other's; write --out")
    pr.add_argument("--fit", required=True, metavar="FP=FILE")
    pr.add_argument("--target", required=True, metavar="FP=FILE")
    pr.add_argument("--out", required=True, type=Path)
    pr.add_argument("--rounds", type=int, default=3, help="coordinate-search rounds of the fit (3)")
    pr.add_argument("--bandwidth", action="append", default=[], metavar="FP=GBS",
                    help="DRAM GB/s per NUMA node of a machine the model does not know")
    pr.add_argument("--max-accuracy-drop", type=float, default=1.0)
    co = sub.add_parser("compare", help="a committed prediction beside the target's measurements")
    co.add_argument("prediction", type=Path)
    co.add_argument("--target", required=True, metavar="FP=FILE")
    co.add_argument("--out", type=Path, help="also write the comparison as JSON")
    args = p.parse_args(argv)
    try:
        if args.command == "predict":
            pred = predict(args.fit, args.target, bandwidths=parse_bandwidths(args.bandwidth),
                           rounds=args.rounds, max_drop=args.max_accuracy_drop)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(pred, indent=1, sort_keys=True))
            print(f"wrote {args.out}: best {_x(pred['best'])}, layout winner "
                  f"{pred['layout_winner']}; commit it before comparing: git add {args.out} "
                  "&& git commit")
            return 0
        result = compare(args.prediction, args.target)
    except (LandscapeRefused, OSError, json.JSONDecodeError, KeyError) as exc:
        print(f"two_machines: {exc}", file=sys.stderr)
        return 2
    print(markdown(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
