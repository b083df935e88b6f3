"""Will a 30-minute search find the optimum on a 2-socket, 112-core server? By simulation.

    python3 -m benchmarks.replay.at_scale --seeds 20                  # every simulated machine
    python3 -m benchmarks.replay.at_scale --machines gnr-snc3 --seeds 3
    python3 -m benchmarks.replay.at_scale --calibrate                 # the model's fit and checks
    python3 -m benchmarks.replay.at_scale --startup-draws 0           # TPE's own start-up draws
    python3 -m benchmarks.replay.at_scale --trial-seconds 60          # a script whose trial takes a minute
    python3 -m benchmarks.replay.at_scale --capture DIR --bandwidth 204.8   # your machine, from
                                        # `autotune probe --capture DIR` and its GB/s per NUMA node

Each simulated machine (benchmarks/landscapes/model_machines.py) is a probe Topology; the real space code
resolves search_spaces/cpu.yaml on it, the landscape model (benchmarks/landscapes/model.py) answers
every configuration of that space, and benchmarks/replay/efficiency.py replays the REAL search
loop on it (run_search, make_sampler, ruled_out, the budget plan, the stopping rules, trial
seconds from the model) against random and grid search (HyperTune's order), over N seeds. No
trial is run: a whole machine takes seconds to minutes of CPU, and its figures are the model's,
not measurements.

Results are counted in trials (every launched configuration, the two references included) and in
simulated minutes (what those trials and the quality runs cost on the model's clock). By default
a trial costs what the model says the built-in CNN costs (start-up, warmup, a 5 s window: about
8 s for the default launch); `--trial-seconds T` models a workload whose default launch takes T
seconds a trial: every trial and quality run is stretched by the same factor, so relative costs
(more ranks start slower) are kept and only the clock changes.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from autotune.config import Config
from autotune.errors import AutotuneError
from autotune.probe.topology import Topology

from benchmarks import RESULTS
from benchmarks.landscapes.model import Hardware, Params
from benchmarks.landscapes.model_machines import (calibrate, capture_machine, extended_optimum,
                                                  fit_report, machines, model_landscape,
                                                  published_shapes)
from benchmarks.landscapes.table import DATA, Landscape

from .efficiency import _finite, compare

# the Zen 5 machine's landscape (AMD EPYC family 26, 2 cores, 2026-11-24)
RECORDED = DATA / "landscape-115e441fefef.json"


def default_trial_seconds(land: Landscape) -> float:
    """What the default launch's trial costs on this landscape (the unit --trial-seconds sets)."""
    row = land.rows.get(Config().key())
    if not row or not row.get("seconds"):
        raise ValueError("the landscape has no timed default launch to scale trial lengths by")
    return float(row["seconds"])


def with_trial_seconds(land: Landscape, trial_s: float | None) -> Landscape:
    """The same landscape with every trial and quality run stretched so that the default launch's
    trial takes `trial_s` seconds (None: unchanged). Throughputs and outcomes are untouched."""
    if trial_s is None:
        return land
    if trial_s <= 0:
        raise ValueError(f"trial seconds must be > 0, got {trial_s:g}")
    factor = trial_s / default_trial_seconds(land)
    rows = {k: ({**r, "seconds": r["seconds"] * factor} if r.get("seconds") else r)
            for k, r in land.rows.items()}
    acc = {k: ({**a, "seconds": a["seconds"] * factor} if a.get("seconds") else a)
           for k, a in land.accuracy.items()}
    return Landscape({**land.data, "rows": rows, "accuracy": acc, "trial_scale": factor})


def simulate(name: str, seeds: int, budget_s: float = 1800.0, max_drop: float = 1.0,
             params: Params = Params(), space: str = "cpu", say=print,
             startup_draws: int | None = None, warm_start: bool = False,
             trial_s: float | None = None,
             machine: tuple[Topology, Hardware] | None = None) -> dict[str, Any]:
    """One machine: `name` of model_machines.machines(), or any name with `machine` given."""
    topology, hw = machine or machines()[name]
    t0 = time.perf_counter()
    land = with_trial_seconds(model_landscape(name, topology, hw, params, space_name=space), trial_s)
    oracle, where = land.oracle(max_drop)
    best_any, best_cfg = extended_optimum(topology, hw, params, land, max_drop)
    say(f"{name}: space {land.data['space']['size']} configs, oracle {oracle:.0f}/s "
        f"(any layout: {best_any:.0f}/s), default trial {default_trial_seconds(land):.1f}s, built in {time.perf_counter() - t0:.0f}s; searching...")
    out = compare(land, seeds=seeds, max_drop=max_drop, budget_s=budget_s,
                  startup_draws=startup_draws, warm_start=warm_start)
    row = {"machine": name, "space": land.data["space"]["source"], "hardware": hw.name,
           "cpu": topology.isa.model_name, "space_size": land.data["space"]["size"],
           "launchable": out["launchable"], "oracle": oracle,
           "oracle_config": where["config"] if where else None,
           "optimum_any_layout": best_any,
           "optimum_any_layout_config": best_cfg.to_dict() if best_cfg else None,
           # None: the model found no launchable layout beyond the space to compare with
           "oracle_in_space": oracle >= 0.995 * best_any if best_any else None,
           "oracle_share_of_optimum": oracle / best_any if best_any else 0.0,
           "trial_seconds": round(default_trial_seconds(land), 2),
           **outcome_row(out), "seconds": round(time.perf_counter() - t0, 1)}
    return {"row": row, "replay": out}


STRATEGIES = ("autotune", "random", "grid")


def outcome_row(out: dict[str, Any]) -> dict[str, Any]:
    """Trials and simulated seconds to 95% / 99% (median and quartiles over seeds), the 30-minute
    success and the targets, from efficiency.compare's output."""
    s = out["summary"]
    stops = [r["at_default_stop"] for r in out["runs"]["autotune"]]
    a95, r95, g95 = (s[k]["trials_95"]["median"] for k in STRATEGIES)
    row: dict[str, Any] = {}
    for what in ("trials_95", "trials_99", "seconds_95", "seconds_99"):
        row[what] = {k: s[k][what]["median"] for k in STRATEGIES}
        row[what + "_spread"] = {k: [s[k][what]["q1"], s[k][what]["q3"]] for k in STRATEGIES}
    row.update({
        "success_30min": sum(a["best_fraction"] >= 0.95 for a in stops) / len(stops),
        "at_30min_stop": s["autotune"]["at_default_stop"],
        "targets": {"quarter_of_grid": a95 <= g95 / 4, "half_of_random": a95 <= r95 / 2}})
    return row


def _fmt(v: float) -> str:
    return "never" if v is None or v == float("inf") else f"{v:g}"


def _min(v: float | None) -> str:
    return "never" if v is None or v == float("inf") else f"{v / 60:.1f}"


def markdown(rows: list[dict[str, Any]], seeds: int) -> str:
    head = ("| machine | space (launchable) | oracle in space? | trial s | trials to 95%: autotune "
            "[IQR] / random / grid | sim. min to 95%: autotune [IQR] / random / grid | trials "
            "to 99%: autotune | 30-min success | targets (1/4 grid, 1/2 random) |\n"
            "|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        t, sec = r["trials_95"], r["seconds_95"]
        tq, sq = r["trials_95_spread"]["autotune"], r["seconds_95_spread"]["autotune"]
        inside = ("unknown" if r["oracle_in_space"] is None else "yes" if r["oracle_in_space"]
                  else f"no ({r['oracle_share_of_optimum']:.0%})")
        lines.append(
            f"| {r['machine']} | {r['space_size']} ({r['launchable']}) | {inside} | "
            f"{r['trial_seconds']:g} | "
            f"{_fmt(t['autotune'])} [{_fmt(tq[0])}-{_fmt(tq[1])}] / {_fmt(t['random'])} / "
            f"{_fmt(t['grid'])} | {_min(sec['autotune'])} [{_min(sq[0])}-{_min(sq[1])}] / "
            f"{_min(sec['random'])} / {_min(sec['grid'])} | "
            f"{_fmt(r['trials_99']['autotune'])} | {r['success_30min']:.0%} | "
            f"{'met' if r['targets']['quarter_of_grid'] else 'MISSED'}, "
            f"{'met' if r['targets']['half_of_random'] else 'MISSED'} |")
    lines.append(f"\n(medians over {seeds} seeds, [interquartile range]; grid order is "
                 "deterministic; 'trial s': the default launch's simulated trial)")
    return "\n".join(lines)


def calibration_report(params: Params = Params(), refit: bool = False) -> dict[str, Any]:
    land = Landscape.load(RECORDED)
    fitted = calibrate(land, params) if refit else params
    shapes = {"cnn_78k_params": published_shapes(fitted),
              "resnet18_11.7M_params": published_shapes(
                  dataclasses.replace(fitted, grad_bytes=11.7e6 * 4))}
    return {"recorded_on": "2-core AMD EPYC family 26 model 2 (Zen 5) VM, 2026-11-24",
            "fit": fit_report(land, fitted), "params": fitted.__dict__, "published_shapes": shapes}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.replay.at_scale", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--machines", nargs="+", choices=sorted(machines()),
                   help="default: all (none with --capture)")
    p.add_argument("--capture", metavar="DIR",
                   help="also simulate the machine captured in DIR by `autotune probe --capture "
                        "DIR` (needs --bandwidth): will a search fit your nodes' budget?")
    p.add_argument("--bandwidth", type=float, metavar="GBS",
                   help="with --capture: DRAM bandwidth of one NUMA node, GB/s (vendor peak: "
                        "channels x MT/s x 8 bytes / nodes per socket)")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--budget", type=float, default=1800.0, help="search budget, seconds (1800)")
    p.add_argument("--trial-seconds", type=float, metavar="T",
                   help="model a workload whose default launch takes T seconds a trial (every "
                        "trial and quality run stretched alike; default: the built-in CNN's "
                        "~8 s); e.g. 60 for a script whose trial takes a minute")
    p.add_argument("--space", default="cpu",
                   help="space file or built-in name (default cpu, the one the search uses)")
    p.add_argument("--startup-draws", type=int, metavar="N",
                   help="variant: TPE start-up trials drawn from launchable configurations "
                        "(default: the search's 6; 0: TPE's own uniform draws)")
    p.add_argument("--warm-start", action="store_true",
                   help="variant: enqueue efficiency.py's hardware-informed bets first")
    p.add_argument("--calibrate", action="store_true",
                   help="only the model's fit on the recorded landscape and the published shapes")
    p.add_argument("--refit", action="store_true", help="with --calibrate: fit again (~1 minute)")
    p.add_argument("--merge", nargs="+", metavar="FILE",
                   help="combine the rows of earlier --out files (one machine each, run side by "
                        "side) into --out and print the table; runs nothing")
    p.add_argument("--out", default=str(RESULTS / "search_at_scale.json"))
    return p


def chosen_machines(args: argparse.Namespace) -> dict[str, tuple[Topology, Hardware]]:
    """The machines to simulate; ValueError / ProbeError name the bad argument."""
    if args.seeds < 1:
        raise ValueError(f"--seeds must be at least 1, got {args.seeds}")
    if args.trial_seconds is not None and not args.trial_seconds > 0:
        raise ValueError(f"--trial-seconds must be more than 0, got {args.trial_seconds:g}")
    if (args.capture is None) != (args.bandwidth is None):
        raise ValueError("--capture DIR and --bandwidth GBS go together: a capture holds no "
                         "memory bandwidth")
    known = machines()
    chosen = {n: known[n] for n in (args.machines or ([] if args.capture else known))}
    if args.capture:
        name, topology, hw = capture_machine(args.capture, args.bandwidth)
        chosen[name] = (topology, hw)
    return chosen


def merge(files: list[str], out: str) -> int:
    parts = [json.loads(Path(f).read_text()) for f in files]
    merged = {"seeds": min(x["seeds"] for x in parts), "budget_s": parts[0]["budget_s"],
              "space": parts[0].get("space"), "trial_seconds": parts[0].get("trial_seconds"),
              "rows": [r for x in parts for r in x["rows"]],
              "calibration": parts[0]["calibration"],
              "replays": {k: v for x in parts for k, v in x["replays"].items()}}
    Path(out).write_text(json.dumps(merged, indent=1))
    print(markdown(merged["rows"], merged["seeds"]))
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.merge:
        return merge(args.merge, args.out)
    if args.calibrate:
        rep = calibration_report(refit=args.refit)
        print(json.dumps({k: rep[k] for k in ("recorded_on", "fit", "published_shapes")}, indent=1))
        return 0
    try:
        chosen = chosen_machines(args)
    except (ValueError, AutotuneError) as e:   # bad input: one line, nothing written
        print(f"search_at_scale: error: {e}", file=sys.stderr)
        return 2
    results, rows = {}, []
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    for name, machine in chosen.items():
        res = simulate(name, args.seeds, args.budget, space=args.space,
                       startup_draws=args.startup_draws, warm_start=args.warm_start,
                       trial_s=args.trial_seconds, machine=machine)
        rows.append(res["row"])
        results[name] = res
        print(markdown([res["row"]], args.seeds).splitlines()[-3], flush=True)
        # written after every machine: an interrupted run keeps what it finished
        summary = {"seeds": args.seeds, "budget_s": args.budget, "space": args.space, "rows": rows,
                   "trial_seconds": args.trial_seconds, "capture": args.capture,
                   "bandwidth_gbs": args.bandwidth,
                   "startup_draws": args.startup_draws, "warm_start": args.warm_start,
                   "calibration": calibration_report(),
                   "replays": {n: {k: v for k, v in r["replay"].items() if k != "runs"}
                               for n, r in results.items()}}
        out_path.write_text(json.dumps(_finite(summary), indent=1, default=str))
    print(markdown(rows, args.seeds))
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
