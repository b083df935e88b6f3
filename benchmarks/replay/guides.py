"""Which way of proposing trials reaches the optimum soonest? By simulation, side by side.

    python3 -m benchmarks.replay.guides --seeds 20                       # every machine, 7 s and 60 s trials
    python3 -m benchmarks.replay.guides --seeds 5 --machines epyc-7763-nps4 --variants descent tpe

Each simulated machine's landscape (benchmarks/replay/at_scale.py: the model, the real space
code) and the recorded 2-core landscape are built once and replayed by the REAL search loop under
each variant, at each trial length (--trial-seconds: the default launch's trial, every trial and
quality run stretched alike), against random and grid search on the same table. Variants:

  descent  the search's default: the hardware's first guess, coordinate descent around the
           leader (autotune/search/guide.py), then multivariate TPE (group=True)
  guess    the first guess only, then TPE's launchable start-up draws and TPE
  tpe      the previous search: six launchable random draws, then TPE
  gp       six launchable draws, then Optuna's GPSampler with the trials' constraints
  +stop    the same with losing trials ended after their first timed windows
           (autotune/measure/early_stop.py; efficiency.early_stopping models the windows)

Counted in trials (the two references included: verification needs them) and in simulated
minutes. Figures are the model's (and the recorded table's), not measurements.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import RESULTS
from benchmarks.landscapes.model_machines import machines, model_landscape
from benchmarks.landscapes.table import Landscape

from .at_scale import RECORDED, outcome_row, with_trial_seconds
from .efficiency import _finite, compare

VARIANTS = {"descent": ("descent", "tpe", False), "guess": ("guess", "tpe", False),
            "tpe": ("none", "tpe", False), "gp": ("none", "gp", False),
            "descent+stop": ("descent", "tpe", True), "tpe+stop": ("none", "tpe", True)}
RECORDED_NAME = "recorded-2core-zen5"


def landscapes(names: list[str]) -> dict[str, Landscape]:
    out = {}
    for name in names:
        if name == RECORDED_NAME:
            out[name] = Landscape.load(RECORDED)
        else:
            topology, hw = machines()[name]
            out[name] = model_landscape(name, topology, hw)
    return out


def run_machine(name: str, land: Landscape, seeds: int, variants: list[str],
                trial_lengths: list[float], say=print) -> list[dict[str, Any]]:
    rows = []
    for trial_s in trial_lengths:
        scaled = with_trial_seconds(land, trial_s)
        for variant in variants:
            guide, sampler, early = VARIANTS[variant]
            t0 = time.perf_counter()
            out = compare(scaled, seeds=seeds, guide=guide, sampler=sampler, early_stop=early)
            row = {"machine": name, "variant": variant, "trial_seconds": trial_s,
                   "launchable": out["launchable"], "oracle": out["oracle"]["throughput"],
                   **outcome_row(out), "replay_s": round(time.perf_counter() - t0, 1)}
            rows.append(row)
            say(line(row), flush=True)
    return rows


def _v(x: float | None) -> str:
    return "never" if x is None or x == float("inf") else f"{x:g}"


def _m(x: float | None) -> str:
    return "never" if x is None or x == float("inf") else f"{x / 60:.1f}"


def line(r: dict[str, Any]) -> str:
    t, s = r["trials_95"], r["seconds_95"]
    tq, sq = r["trials_95_spread"]["autotune"], r["seconds_95_spread"]["autotune"]
    return (f"| {r['machine']} | {r['trial_seconds']:g} | {r['variant']} | "
            f"{_v(t['autotune'])} [{_v(tq[0])}-{_v(tq[1])}] | {_v(t['random'])} | {_v(t['grid'])} | "
            f"{_m(s['autotune'])} [{_m(sq[0])}-{_m(sq[1])}] | {_v(r['trials_99']['autotune'])} | "
            f"{r['success_30min']:.0%} |")


HEAD = ("| machine | trial s | variant | trials to 95% [IQR] | random | grid | sim. min to 95% "
        "[IQR] | trials to 99% | 30-min success |\n|---|---|---|---|---|---|---|---|---|")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.replay.guides", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    every = list(machines()) + [RECORDED_NAME]
    p.add_argument("--machines", nargs="+", choices=every, help="default: all")
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    p.add_argument("--trial-seconds", nargs="+", type=float, default=[7.0, 60.0], metavar="T")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--out", default=str(RESULTS / "search_guides.json"))
    args = p.parse_args(argv)
    if args.seeds < 1 or any(not t > 0 for t in args.trial_seconds):
        print("search_guides: error: --seeds and --trial-seconds must be positive", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    print(HEAD)
    for name in args.machines or every:
        land = landscapes([name])[name]
        rows += run_machine(name, land, args.seeds, args.variants, args.trial_seconds)
        # written after every machine: an interrupted run keeps what it finished
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(_finite({"seeds": args.seeds, "rows": rows}),
                                             indent=1, default=str))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
