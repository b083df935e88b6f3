"""Recording a landscape on this machine: every configuration of the space, one trial each
(table.py describes the file and is the one that reads and writes it).

    python3 -m benchmarks.landscapes.record [--seconds 5] [--limit N] [--out FILE]
    python3 -m benchmarks.landscapes.record --synthetic formula --out FILE    # made-up, for tests
"""
from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import time
from pathlib import Path
from typing import Any

from autotune.result import Outcome
from autotune.config import Config
from autotune.plan.feasible import ruled_out
from autotune.search.references import reference_configs
from autotune.space.resolve import ResolvedSpace, find_space, load_space, resolve
from autotune.probe.topology import Topology

from benchmarks import ROOT

from .synthetic import synthetic
from .table import SCHEMA, Landscape, _row, _short, default_path, math_key


def _trial_row(config: Config, role: str, params, out) -> dict[str, Any]:
    fields: dict[str, Any] = {"outcome": out.outcome, "reason": out.reason[:500],
                              "seconds": round(out.seconds, 3), "throughput": None}
    if out.ok:
        fields.update({k: getattr(out, k) for k in (
            "throughput", "median_throughput", "throughput_iqr", "step_median_s", "step_iqr_s",
            "timed_steps", "startup_s", "timed_share", "cpu_share", "accuracy")})
    elif out.log_tail:
        fields["log_tail"] = out.log_tail[-1500:]
    return _row(config, role, params, **fields)


def record(*, out: str | None = None, seconds: float = 5.0, limit: int | None = None,
           space_name: str = "cpu", workload: str = "cnn", order_seed: int = 0,
           quality_samples: int | None = None, say=print) -> Path:
    from autotune.probe import probe
    from autotune.study.storage import library_versions
    from autotune.run.trial import TrialSettings, run_trial

    topology = probe()
    space = resolve(load_space(find_space(space_name)), topology)
    path = Path(out) if out else default_path(topology.fingerprint())
    if path.exists():
        land = Landscape.load(path)
        _check_same(land, topology, space, seconds, workload, path)
    else:
        land = Landscape({"schema": SCHEMA, "fingerprint": topology.fingerprint(),
                          "topology": topology.to_json(), "space": space.to_json(),
                          "library_versions": library_versions(), "workload": workload,
                          "target_seconds": seconds, "started_at": time.time(),
                          "rows": {}, "accuracy": {}})
    settings = TrialSettings(workload=workload, target_seconds=seconds, timeout_s=120.0,
                             results_dir=str(ROOT / "autotune-results" / "landscape"),
                             **({"accuracy_samples": quality_samples} if quality_samples else {}))
    todo: list[tuple[str, Config, dict[str, Any] | None]] = [
        (role, c, None) for role, c in reference_configs(topology, Config())]
    grid = [("grid", space.to_config(p), p) for p in space.grid()]
    # Shuffled (seeded): slow drift of the machine over a 40-minute recording then spreads over
    # the whole grid instead of penalising whichever knob value the grid order puts last.
    random.Random(order_seed).shuffle(grid)
    todo += grid
    launched = 0
    for role, config, params in todo:
        key = config.key()
        if key in land.rows:
            continue
        reason = ruled_out(config, space, topology)
        if reason:
            land.rows[key] = _row(config, role, params, outcome=Outcome.INFEASIBLE, reason=reason,
                                  seconds=0.0, throughput=None)
            land.save(path)
            continue
        if limit is not None and launched >= limit:
            break
        out_ = run_trial(config, topology, settings)
        launched += 1
        land.rows[key] = row = _trial_row(config, role, params, out_)
        land.save(path)
        done = sum(1 for r in land.rows.values() if r["outcome"] != Outcome.INFEASIBLE)
        thr = f"{row['throughput']:.1f}/s" if row["throughput"] else row["outcome"]
        say(f"[{done}/{len(todo)}] {thr:>12} {row['seconds']:5.1f}s  {_short(config)}")
    _record_accuracy(land, topology, settings, path, say)
    land.data["finished_at"] = time.time()
    land.save(path)
    say(f"landscape: {len(land.rows)} rows, {land.missing()} grid configs still missing -> {path}")
    return path


def _record_accuracy(land: Landscape, topology: Topology, settings, path: Path, say) -> None:
    """Once per (global batch, precision), on the fastest ok config with that math: the other
    knobs do not change what is computed, so they cannot change the accuracy."""
    from autotune.run.trial import run_trial
    fastest: dict[str, tuple[float, Config]] = {}
    for row in land.rows.values():
        if row["outcome"] == Outcome.OK and row["throughput"]:
            c = Config.from_dict(row["config"])
            k = math_key(c)
            if k not in fastest or row["throughput"] > fastest[k][0]:
                fastest[k] = (row["throughput"], c)
    if "32:fp32" not in fastest and "32:fp32" not in land.accuracy:
        fastest["32:fp32"] = (0.0, Config())  # the default launch's accuracy is the baseline
    for k, (_, c) in sorted(fastest.items()):
        if k in land.accuracy:
            continue
        out = run_trial(c, topology, dataclasses.replace(settings, timeout_s=600.0), mode="accuracy")
        land.accuracy[k] = {"outcome": out.outcome, "reason": out.reason[:500],
                            "accuracy": out.accuracy if out.ok else None,
                            "seconds": round(out.seconds, 3), "config": c.to_dict()}
        land.save(path)
        say(f"accuracy {k}: {land.accuracy[k]['accuracy']} ({out.seconds:.1f}s)")


def _check_same(land: Landscape, topology: Topology, space: ResolvedSpace, seconds: float,
                workload: str, path: Path) -> None:
    problems = []
    if land.data["fingerprint"] != topology.fingerprint():
        problems.append(f"machine {land.data['fingerprint']} != this one {topology.fingerprint()}")
    if land.data["space"]["knobs"] != space.to_json()["knobs"]:
        problems.append("the resolved space differs (libraries installed or removed?)")
    if land.data["target_seconds"] != seconds or land.data["workload"] != workload:
        problems.append(f"recorded with --seconds {land.data['target_seconds']} and workload "
                        f"{land.data['workload']}")
    if problems:
        raise SystemExit(f"{path}: cannot resume: {'; '.join(problems)}. Use another --out.")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.landscapes.record", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--synthetic", choices=("formula", "random"),
                   help="write a made-up landscape instead of measuring this machine's")
    p.add_argument("--seconds", type=float, default=5.0,
                   help="timed window per trial (default 5, what a 30-minute search uses)")
    p.add_argument("--limit", type=int, help="launch at most N new trials this run, then stop")
    p.add_argument("--out", help="landscape file (default benchmarks/landscapes/data/landscape-<fp>.json)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workload", default="cnn")
    p.add_argument("--quality-samples", type=int,
                   help="training samples of each accuracy run (default: the search's)")
    args = p.parse_args(argv)
    if args.synthetic:
        if not args.out:
            p.error("--synthetic needs --out")
        synthetic(args.synthetic, args.seed, args.seconds).save(args.out)
        print(f"wrote {args.out}")
        return 0
    record(out=args.out, seconds=args.seconds, limit=args.limit, workload=args.workload,
           quality_samples=args.quality_samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
