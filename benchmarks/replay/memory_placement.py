"""What the memory-placement knob (mem_policy, issue 37) costs and gains a 30-minute search, by
simulation. SIMULATED: no trial runs; every figure is the landscape model's.

    python3 -m benchmarks.replay.memory_placement --seeds 10                      # every model machine
    python3 -m benchmarks.replay.memory_placement --machines xeon-max-snc4-flat --seeds 3
    python3 -m benchmarks.replay.memory_placement --memory-share 4 --seeds 0      # a bandwidth-bound
                                        # workload: the oracles with and without the knob alone

Each model machine (benchmarks/landscapes/model_machines.py, the two issue-37 captures included) has its
built-in cpu.yaml resolved twice by the real space code: as it is (mem_policy offered where the
probe found what it needs) and with mem_policy left out (the space before the knob). For each,
the real search loop (run_search: references, the hardware's guess, the descent, TPE, the budget
plan and stopping rules of a 30-minute search) is replayed on the landscape model over the same
seeds, side by side, and compared with that space's own oracle (its best launch within the
accuracy tolerance, found by walking the whole grid).

The spaces hold 1.6 to 9 million configurations: the landscape is computed when a configuration
is asked for (ModelLandscape) instead of stored whole, the oracle walks the grid once without
keeping it (`stream_oracle`), and the random and grid baselines of at_scale.py are not run.
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import optuna

from autotune.config import CCL_KNOBS, Config
from autotune.plan.feasible import ruled_out
from autotune.progress import Silent
from autotune.result import Outcome, TrialResult
from autotune.search.budget import plan_budget
from autotune.search.loop import run_search
from autotune.search.options import SearchOptions
from autotune.search.references import make_sampler
from autotune.space.resolve import ResolvedSpace, find_space, load_space, resolve
from autotune.study.storage import open_study

from benchmarks import RESULTS
from benchmarks.landscapes.model import Hardware, Params, accuracy, throughput, trial_seconds
from benchmarks.landscapes.model_machines import machines
from benchmarks.landscapes.table import SCHEMA, Landscape, SimClock, math_key

from .efficiency import _Trace, _finite

# Knobs that decide whether a launch can run (the grid walk checks them once per combination,
# then times every value of the others).
_LAYOUT = ("nnodes", "nproc", "ranks_per_numa_node", "threads", "binding", "backend", "precision",
           "ipex", "global_batch", "mem_policy", *CCL_KNOBS, "device", "numa_binding",
           "batch_size", "compile")
PHASE2_TRIALS = 150   # after the 30-minute search: how far a replay goes looking for 95% / 99%


class _Rows(dict):
    """The model answers every configuration: all are 'in' the landscape; the dict keeps the
    ones computed so far."""

    def __contains__(self, key: object) -> bool:
        return True


@dataclasses.dataclass
class ModelLandscape(Landscape):
    machine: Any = None          # (Topology, Hardware)
    params: Params = dataclasses.field(default_factory=Params)
    window_s: float = 5.0

    def row(self, config: Config, space: ResolvedSpace) -> dict[str, Any]:
        key = config.key()
        row = dict.get(self.rows, key)
        if row is None:
            topology, hw = self.machine
            why = ruled_out(config, space, topology)
            thr = None if why else throughput(config, topology, hw, self.params)
            row = ({"outcome": Outcome.INFEASIBLE, "reason": why, "seconds": 0.0, "throughput": None}
                   if why else {"outcome": Outcome.OK, "throughput": thr, "config": config.to_dict(),
                                "seconds": trial_seconds(config, thr, self.params, self.window_s)})
            dict.__setitem__(self.rows, key, row)
        return row

    def evaluator(self, clock: SimClock):
        space = self.space()

        def evaluate(config: Config, mode: str, **_kw: Any) -> TrialResult:
            if mode == "accuracy":
                a = self.accuracy[math_key(config)]
                clock.t += a["seconds"]
                return TrialResult(outcome=Outcome.OK, accuracy=a["accuracy"], seconds=a["seconds"])
            row = self.row(config, space)
            clock.t += row["seconds"]
            return TrialResult(outcome=row["outcome"], reason=row.get("reason") or "",
                                 throughput=row["throughput"], seconds=row["seconds"])
        return evaluate


def model_landscape(name: str, topology, hw: Hardware, space: ResolvedSpace,
                    params: Params) -> ModelLandscape:
    land = ModelLandscape({"schema": SCHEMA, "fingerprint": f"model-{name}",
                           "topology": topology.to_json(), "space": space.to_json(),
                           "rows": _Rows(), "accuracy": {}, "synthetic": True,
                           "workload": "model:cnn"}, machine=(topology, hw), params=params)
    base = land.row(Config(), space)["throughput"]
    for gb in space.knobs.get("global_batch", (32,)):
        for prec in space.knobs.get("precision", ("fp32",)):
            # a quality run trains 4096 samples; timed at the default launch's speed (~)
            land.accuracy[f"{gb}:{prec}"] = {"outcome": Outcome.OK, "accuracy": accuracy(gb, prec),
                                             "seconds": params.startup_s + 4096 / base + 2.0}
    return land


def stream_oracle(land: ModelLandscape, space: ResolvedSpace, max_drop: float = 1.0
                  ) -> dict[str, Any]:
    """The best launch of the whole grid within the accuracy tolerance, walked once and not
    kept; launches that differ only in oneCCL knobs under another backend are one launch."""
    topology, hw = land.machine
    knobs = space.knobs
    outer = [k for k in knobs if k in _LAYOUT]
    inner = [k for k in knobs if k not in _LAYOUT]
    base_acc, default = accuracy(32, "fp32"), Config()
    names = space.topology_names
    best, where, launchable = 0.0, None, 0
    for combo in itertools.product(*(knobs[k] for k in outer)):
        params = dict(zip(outer, combo))
        if params.get("backend", "gloo") != "ccl" and any(
                params.get(k, getattr(default, k)) != getattr(default, k) for k in CCL_KNOBS):
            continue
        if _cannot_split(params, names):   # most of the grid: decided without a Config
            continue
        first = space.to_config({**params, **{k: knobs[k][0] for k in inner}})
        if (base_acc - accuracy(first.global_batch, first.precision)) * 100 > max_drop:
            continue
        if ruled_out(first, space, topology):
            continue
        for values in itertools.product(*(knobs[k] for k in inner)):
            config = first.with_(**dict(zip(inner, values)))
            launchable += 1
            thr = throughput(config, topology, hw, land.params)
            if thr > best:
                best, where = thr, config
    return {"oracle": best, "config": where, "launchable": launchable}


def _cannot_split(params: dict[str, Any], names: dict[str, int]) -> bool:
    """The two rules that rule out most of a large grid, checked on the values alone: more
    threads than usable cores (the space's constraint), and a global batch the ranks cannot
    split evenly (ruled_out says the same of these, more slowly)."""
    npn, threads = params.get("ranks_per_numa_node"), params.get("threads")
    if npn is None:
        return False
    nproc = npn * names["numa_nodes"]
    if threads is not None and threads * nproc > names["usable_cores"]:
        return True
    return params.get("global_batch", 32) % nproc != 0


def replay(land: ModelLandscape, seed: int, oracle: float, budget_s: float = 1800.0,
           max_drop: float = 1.0) -> dict[str, Any]:
    """The 30-minute search (phase 1, its own stopping rules), then the same study resumed
    without them for up to PHASE2_TRIALS more trials, to count the trials to 95% / 99%."""
    space, topology = land.space(), land.topology()
    clock = SimClock()
    trace = _Trace(land, oracle, max_drop, clock)
    study = open_study(optuna.storages.InMemoryStorage(), f"mem-{seed}",
                       sampler=make_sampler(seed))

    class Traced(Silent):
        def trial_end(self, *, record, **_: Any) -> None:
            trace.saw(record.config, record.outcome, record.throughput)
    on_event = Traced()
    bp = plan_budget(budget_s)
    first = run_search(study, space=space, topology=topology, evaluate=land.evaluator(clock),
                       clock=clock, progress=on_event,
                       options=SearchOptions(budget_s=budget_s, min_trial_s=bp.min_trial_s,
                                             verify_reserve_s=bp.verify_reserve_s, seed=seed,
                                             max_accuracy_drop=max_drop))
    at_stop = {"stop_reason": first.stop_reason, "launched": trace.launched,
               "minutes": round(clock.t / 60, 1),
               "best_fraction": trace.best / oracle if oracle else 0.0}
    if not trace.done():
        run_search(study, space=space, topology=topology, evaluate=land.evaluator(clock),
                   clock=clock, progress=on_event,
                   options=SearchOptions(budget_s=1e12, min_trial_s=0.0, patience=10**9,
                                         seed=seed, max_accuracy_drop=max_drop,
                                         max_trials=trace.launched + PHASE2_TRIALS))
    return {**trace.result(), "seed": seed, "at_30min_stop": at_stop}


def simulate(name: str, seeds: int, *, with_knob: bool, params: Params, say=print,
             machine=None) -> dict[str, Any]:
    topology, hw = machine or machines()[name]
    spec = load_space(find_space("cpu"))
    if not with_knob:   # the space as it was before mem_policy
        spec = dataclasses.replace(spec, knobs={k: v for k, v in spec.knobs.items()
                                                if k != "mem_policy"})
    space = resolve(spec, topology)
    t0 = time.perf_counter()
    land = model_landscape(name, topology, hw, space, params)
    found = stream_oracle(land, space)
    say(f"{name} ({'with' if with_knob else 'without'} mem_policy "
        f"{space.knobs.get('mem_policy', ('local',))}): {space.size()} configs, "
        f"{found['launchable']} launchable, oracle {found['oracle']:.0f}/s "
        f"({_changed(found['config'])}) in {time.perf_counter() - t0:.0f}s; replaying...")
    runs = [replay(land, seed, found["oracle"]) for seed in range(seeds)]
    if not runs:   # --seeds 0: the oracles alone
        return {"machine": name, "with_knob": with_knob, "space_size": space.size(),
                "mem_policies": list(space.knobs.get("mem_policy", ("local",))),
                "launchable": found["launchable"], "oracle": found["oracle"],
                "oracle_config": _changed(found["config"]),
                "seconds": round(time.perf_counter() - t0, 1)}
    return {"machine": name, "with_knob": with_knob, "space_size": space.size(),
            "mem_policies": list(space.knobs.get("mem_policy", ("local",))),
            "launchable": found["launchable"], "oracle": found["oracle"],
            "oracle_config": _changed(found["config"]), **summarise(runs),
            "seconds": round(time.perf_counter() - t0, 1), "runs": runs}


def _changed(config: Config | None) -> str:
    from autotune.config import describe_changes
    return describe_changes(config) if config else "none"


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)
    stops = [r["at_30min_stop"] for r in runs]
    return {"trials_95": med("trials_95"), "trials_99": med("trials_99"),
            "trials_95_iqr": [_q([r["trials_95"] for r in runs], q) for q in (0.25, 0.75)],
            "launched_at_stop": statistics.median(s["launched"] for s in stops),
            "minutes_at_stop": statistics.median(s["minutes"] for s in stops),
            "best_fraction_at_stop": statistics.median(s["best_fraction"] for s in stops),
            "worst_fraction_at_stop": min(s["best_fraction"] for s in stops),
            "success_30min": sum(s["best_fraction"] >= 0.95 for s in stops) / len(stops)}


def _q(vals: list[float], q: float) -> float:
    xs = sorted(vals)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def markdown(pairs: list[tuple[dict, dict]], seeds: int, share: float) -> str:
    def f(v: float) -> str:
        return "never" if v == float("inf") else f"{v:g}"
    lines = ["| machine | mem_policy offered | oracle: without / with the knob (its launch) | "
             "trials to 95%: without / with [IQR with] | trials the 30-min search ran: without "
             "/ with | 30-min search at 95% of its oracle: without / with (worst seed with) |",
             "|---|---|---|---|---|---|"]
    for old, new in pairs:
        lines.append(
            f"| {new['machine']} | {', '.join(new['mem_policies'])} | {old['oracle']:.0f} / "
            f"{new['oracle']:.0f}/s ({new['oracle_config']}) | {f(old['trials_95'])} / "
            f"{f(new['trials_95'])} [{f(new['trials_95_iqr'][0])}-{f(new['trials_95_iqr'][1])}] | "
            f"{old['launched_at_stop']:g} / {new['launched_at_stop']:g} | "
            f"{old['success_30min']:.0%} / {new['success_30min']:.0%} "
            f"({new['worst_fraction_at_stop']:.1%}) |")
    lines.append(f"\nSIMULATED (the landscape model, no trial run); medians over {seeds} seeds; "
                 f"workload memory-bound share {share:g}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.replay.memory_placement", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--machines", nargs="+", choices=sorted(machines()))
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--memory-share", type=float, default=1.0,
                   help="the workload's memory-bound share (Params.memory_share; 1: the CNN)")
    p.add_argument("--out", default=str(RESULTS / "memory_placement_sim.json"))
    p.add_argument("--merge", nargs="+", metavar="FILE",
                   help="combine earlier --out files (machines run side by side) into --out and "
                        "print the table; runs nothing")
    args = p.parse_args(argv)
    if args.merge:
        return merge(args.merge, args.out)
    if args.seeds < 0 or not args.memory_share > 0:
        print("memory_placement: error: --seeds >= 0 (0: the oracles alone) and --memory-share "
              "> 0", file=sys.stderr)
        return 2
    params = dataclasses.replace(Params(), memory_share=args.memory_share)
    pairs, out = [], Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for name in args.machines or machines():
        old = simulate(name, args.seeds, with_knob=False, params=params)
        new = simulate(name, args.seeds, with_knob=True, params=params)
        pairs.append((old, new))
        if not args.seeds:
            print(f"| {name} | share {args.memory_share:g} | {old['oracle']:.0f} / "
                  f"{new['oracle']:.0f}/s: x{new['oracle'] / old['oracle']:.3f} with "
                  f"{new['oracle_config']} |", flush=True)
            continue
        print(markdown([pairs[-1]], args.seeds, args.memory_share).splitlines()[2], flush=True)
        out.write_text(json.dumps(_finite({
            "simulated": True, "seeds": args.seeds, "memory_share": args.memory_share,
            "phase2_trials": PHASE2_TRIALS, "command": "python3 -m benchmarks.replay.memory_placement "
            + " ".join(argv if argv is not None else sys.argv[1:]),
            "pairs": [{"without": a, "with": b} for a, b in pairs]}), indent=1, default=str))
    if args.seeds:
        print(markdown(pairs, args.seeds, args.memory_share))
    print(f"wrote {out}")
    return 0


def merge(files: list[str], out: str) -> int:
    parts = [json.loads(Path(f).read_text()) for f in files]
    doc = {**parts[0], "pairs": [p for part in parts for p in part["pairs"]],
           "command": [part["command"] for part in parts]}
    Path(out).write_text(json.dumps(doc, indent=1))
    pairs = [(p["without"], p["with"]) for p in doc["pairs"]]
    inf = float("inf")
    for pair in pairs:   # JSON wrote "never" as null
        for side in pair:
            for k in ("trials_95", "trials_99"):
                side[k] = inf if side[k] is None else side[k]
            side["trials_95_iqr"] = [inf if v is None else v for v in side["trials_95_iqr"]]
    print(markdown(pairs, doc["seeds"], doc["memory_share"]))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
