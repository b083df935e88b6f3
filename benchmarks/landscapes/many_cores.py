"""A landscape of a many-core machine in one time-boxed run (issue 45): the configurations that
teach the landscape model most, each in two windows far apart, the default launch again in every
block, and seeded quality runs of every math class measured.

    python -m benchmarks.landscapes.many_cores --dry-run [--budget 8m] [--window 3]   # the plan, its time here
    python -m benchmarks.landscapes.many_cores --record --out FILE [--budget 8m] [--window 3] [--seeds 2]
        [--quality-samples N] [--capture DIR] [--bandwidth GBS] [--blocks layouts,ccl]

Which configurations, in which order, and how the budget is shared: many_cores_plan.py. The
file is the format benchmarks/landscapes/table.py reads (rows keyed by Config.key(), accuracy per math
class), plus: every window in the order it ran (`windows`: the default launch's show the drift),
each row's windows and its ratio to its block's default launch (`x_default`), the plan, and the
machine's capture (`capture`: every file `autotune probe --capture` writes, so the machine can be
replayed and its fingerprint checked). It is saved after every window: a run killed at its
deadline leaves a landscape of what it measured. scripts/device-run.sh runs it on the GPU
machine as the phase `landscape` (benchmarks/device/run.py).
"""
from __future__ import annotations

import argparse
import dataclasses
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autotune.config import Config
from autotune.result import Outcome
from autotune.search.budget import parse_budget
from autotune.space.resolve import find_space, load_space, resolve

from .table import SCHEMA, Landscape, _row, _short, math_key
from .model import Hardware
from .many_cores_plan import BLOCKS, CUDA_TORCH_EXTRA_S, Plan, Planned, make_plan

# Kept back from the budget: saving, and a launch that runs a little longer than its estimate.
MARGIN_S = 10.0


def capture_files(capture_dir: str | None) -> dict[str, str]:
    """The machine's capture as {path in the capture: text}; taken now when no DIR is given."""
    from autotune.probe import capture
    with tempfile.TemporaryDirectory(prefix="autotune-capture-") as tmp:
        root = Path(capture_dir) if capture_dir else Path(tmp) / "capture"
        if not capture_dir:
            capture(str(root))
        return {str(p.relative_to(root)): p.read_text(errors="replace")
                for p in sorted(root.rglob("*")) if p.is_file()}


def finish_rows(land: Landscape, planned: dict[str, Planned]) -> None:
    """Each configuration's row from its windows: the median throughput, its median ratio to the
    default launch's window of the same block, the mean cost of a window."""
    windows = land.data["windows"]
    default_key = Config().key()
    d_of_block = {w["block"]: w["throughput"] for w in windows
                  if w["key"] == default_key and w["outcome"] == Outcome.OK and w["round"] == 0}
    for key, p in planned.items():
        mine = [w for w in windows if w["key"] == key]
        if p.ruled_out is not None:
            land.rows[key] = _row(p.config, p.role, p.params, outcome=Outcome.INFEASIBLE,
                                  reason=p.ruled_out, seconds=0.0, throughput=None)
            continue
        if not mine:
            continue
        ok = [w for w in mine if w["outcome"] == Outcome.OK and w["throughput"]]
        ratios = [w["throughput"] / d_of_block[w["block"]] for w in ok if d_of_block.get(w["block"])]
        first_bad = next((w for w in mine if w["outcome"] != Outcome.OK), {})
        land.rows[key] = _row(
            p.config, p.role, p.params,
            outcome=Outcome.OK if ok else first_bad.get("outcome", Outcome.CRASH),
            reason="" if ok else first_bad.get("reason", ""),
            throughput=statistics.median(w["throughput"] for w in ok) if ok else None,
            x_default=statistics.median(ratios) if ratios else None,
            cpu_share=statistics.median(w["cpu_share"] or 0.0 for w in ok) if ok else None,
            seconds=round(statistics.fmean(w["seconds"] for w in mine), 3),
            windows=[{k: w[k] for k in ("block", "round", "at", "throughput", "outcome")}
                     for w in mine])


class Recorder:
    """Runs the plan's launches against one deadline, saving the landscape after each."""

    def __init__(self, land: Landscape, path: Path, topology, settings, deadline: float, say):
        self.land, self.path, self.topology, self.settings = land, path, topology, settings
        self.deadline, self.say, self.t0 = deadline, say, time.monotonic()
        self.estimated = self.actual = 0.0
        self.planned: dict[str, Planned] = {}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def factor(self) -> float:
        """How much longer launches take here than planned (1 until one has run)."""
        return self.actual / self.estimated if self.estimated else 1.0

    def fits(self, seconds: float) -> bool:
        return seconds * self.factor() <= self.left() - MARGIN_S

    def launch(self, p: Planned, block: str, round_: int) -> dict[str, Any]:
        from autotune.run.trial import run_trial
        self.planned.setdefault(p.config.key(), p)
        settings = dataclasses.replace(self.settings,
                                       timeout_s=max(30.0, min(120.0, 4 * p.estimate_s)))
        out = run_trial(p.config, self.topology, settings)
        self.estimated, self.actual = self.estimated + p.estimate_s, self.actual + out.seconds
        w = {"key": p.config.key(), "block": block, "round": round_,
             "at": round(time.monotonic() - self.t0, 1), "outcome": out.outcome,
             "throughput": out.throughput if out.ok else None, "seconds": round(out.seconds, 2),
             "cpu_share": out.cpu_share, "reason": out.reason[:300]}
        self.land.data["windows"].append(w)
        finish_rows(self.land, self.planned)
        self.land.save(self.path)
        thr = f"{w['throughput']:.0f}/s" if w["throughput"] else w["outcome"]
        self.say(f"[{w['at']:5.0f}s] {block} {round_}: {thr:>9} {out.seconds:4.1f}s  {_short(p.config)}")
        return w

    def needed(self, plan: Plan, block) -> list[tuple[str, Config, float]]:
        """The quality runs to make before `block`: its math classes (and the default launch's,
        the gate's baseline) not measured yet."""
        mine = {math_key(p.config) for p in block.configs if p.ruled_out is None}
        mine.add(math_key(plan.default.config))
        return [q for q in plan.quality if q[0] in mine and q[0] not in self.land.accuracy]

    def quality(self, classes: list[tuple[str, Config, float]], seeds: int) -> None:
        from autotune.run.trial import run_trial
        for key, config, estimate in classes:
            runs = []
            for seed in range(seeds):
                if not self.fits(estimate):
                    self.say(f"quality {key}: seed {seed} skipped, out of time")
                    break
                runs.append(run_trial(config, self.topology, self.settings, mode="accuracy",
                                      seed=seed))
                self.estimated, self.actual = self.estimated + estimate, self.actual + runs[-1].seconds
            ok = [r for r in runs if r.ok and r.accuracy is not None]
            self.land.accuracy[key] = {
                "outcome": Outcome.OK if ok else (runs[0].outcome if runs else Outcome.UNAVAILABLE),
                "accuracy": statistics.fmean(r.accuracy for r in ok) if ok else None,
                "accuracies": [r.accuracy for r in ok], "seeds": [r.seed for r in ok],
                "seconds": round(statistics.fmean(r.seconds for r in runs), 3) if runs else 0.0,
                "config": config.to_dict(), "reason": "" if ok else (runs[0].reason[:300] if runs else "out of time")}
            self.land.save(self.path)
            self.say(f"quality {key}: {[round(r.accuracy, 4) for r in ok]}")

    def run(self, plan: Plan) -> None:
        for block in plan.blocks:
            quality = self.needed(plan, block)
            cost = block.estimate_s(plan.default) + plan.seeds * sum(q[2] for q in quality)
            if not self.fits(cost + plan.default.estimate_s):
                self.say(f"block {block.name}: skipped, {self.left():.0f}s left")
                self.land.data["plan"]["skipped"].append(block.name)
                continue
            self.quality(quality, plan.seeds)
            for p in block.configs:
                self.planned.setdefault(p.config.key(), p)
            run = [p for p in block.configs if p.ruled_out is None]
            if not run:          # all ruled out (ccl not found here): their rows say why
                finish_rows(self.land, self.planned)
                continue
            self.launch(plan.default, block.name, 0)
            failed = set()
            for i, p in enumerate(run + run[::-1]):
                if p.config.key() in failed or not self.fits(p.estimate_s + plan.default.estimate_s):
                    continue
                if self.launch(p, block.name, 1 + i // len(run))["outcome"] != Outcome.OK:
                    failed.add(p.config.key())   # a failed configuration gets no second window
        if self.fits(plan.default.estimate_s):
            self.launch(plan.default, "closing", 0)


def record(*, out: str, budget_s: float, window_s: float = 3.0, seeds: int = 2,
           quality_samples: int | None = None, capture_dir: str | None = None,
           bandwidth: float | None = None, blocks: tuple[str, ...] | None = None,
           say=print) -> Path:
    from autotune.probe import probe
    from autotune.run.trial import TrialSettings
    from autotune.study.storage import library_versions
    deadline = time.monotonic() + budget_s
    topology = probe()
    space = resolve(load_space(find_space("cpu")), topology)
    plan = plan_here(topology, space, deadline - time.monotonic() - MARGIN_S, window_s, seeds,
                     quality_samples, bandwidth, blocks)
    say(plan.text())
    path = Path(out)
    land = Landscape({
        "schema": SCHEMA, "fingerprint": topology.fingerprint(), "topology": topology.to_json(),
        "space": space.to_json(), "library_versions": library_versions(), "workload": "cnn",
        "target_seconds": window_s, "started_at": time.time(), "rows": {}, "accuracy": {},
        "windows": [], "capture": capture_files(capture_dir),
        "plan": {"recorder": "many_cores", "budget_s": round(plan.budget_s),
                 "estimate_s": round(plan.estimate_s()), "seeds": seeds,
                 "blocks": [b.name for b in plan.blocks], "dropped": [b.name for b in plan.dropped],
                 "skipped": []},
        **({"hardware": {"node_bandwidth_gbs": bandwidth, "vcpus_share_cores": False}}
           if bandwidth else {})})
    results = tempfile.mkdtemp(prefix="autotune-many-cores-")
    settings = TrialSettings(workload="cnn", target_seconds=window_s, results_dir=results,
                             **({"accuracy_samples": quality_samples} if quality_samples else {}))
    try:
        Recorder(land, path, topology, settings, deadline, say).run(plan)
    finally:
        shutil.rmtree(results, ignore_errors=True)
    land.data["finished_at"] = time.time()
    land.save(path)
    say(f"many_cores: {sum(r['outcome'] == Outcome.OK for r in land.rows.values())} configurations "
        f"measured, {len(land.data['windows'])} windows -> {path}")
    return path


def plan_here(topology, space, budget_s: float, window_s: float, seeds: int,
              quality_samples: int | None, bandwidth: float | None,
              blocks: tuple[str, ...] | None = None) -> Plan:
    """The plan for this machine: the model's trial costs, plus a CUDA build's import."""
    import torch
    hw = Hardware(name="here", node_bandwidth_gbs=bandwidth or 100.0)
    return make_plan(space, topology, budget_s=budget_s, window_s=window_s, seeds=seeds,
                     hardware=hw, launch_extra_s=CUDA_TORCH_EXTRA_S if torch.version.cuda else 0.0,
                     only=blocks,
                     **({"quality_samples": quality_samples} if quality_samples else {}))


def device_phase(kit, work: Path, probe: dict[str, Any], args: argparse.Namespace) -> None:
    """benchmarks/device/run.py's phase `landscape`: the recording as one time-boxed step,
    against what is left of the run's deadline; the file goes back as landscape-<fp>.json."""
    budget = kit.left() - 30.0          # the step's own start and the copy after it
    if budget < 90:
        kit.log(f"landscape: skipped: {kit.left():.0f}s left before the deadline")
        return
    out = work / "landscape.json"
    argv = [sys.executable, "-m", "benchmarks.landscapes.many_cores", "--record", "--out", str(out),
            "--budget", f"{budget:.0f}s", "--window", str(args.landscape_window)]
    if kit.capture is not None:
        argv += ["--capture", str(kit.capture)]
    if args.bandwidth:
        argv += ["--bandwidth", str(args.bandwidth)]
    kit.step("landscape", "record", argv, budget + 20, work)
    if out.exists():
        shutil.copyfile(out, kit.out / f"landscape-{probe.get('fingerprint', 'unknown')}.json")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.landscapes.many_cores", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--dry-run", action="store_true", help="print the plan and its time here")
    what.add_argument("--record", action="store_true", help="measure it (needs --out)")
    p.add_argument("--out", help="the landscape file to write")
    p.add_argument("--budget", type=parse_budget, default=480.0,
                   help="the whole recording, probe included (default 8m)")
    p.add_argument("--window", type=float, default=3.0, help="timed seconds a window (3)")
    p.add_argument("--seeds", type=int, default=2, help="quality runs of each math class (2)")
    p.add_argument("--quality-samples", type=int,
                   help="training samples of a quality run (default: the search's)")
    p.add_argument("--capture", help="the machine's `autotune probe --capture` folder (default: "
                                     "taken now)")
    p.add_argument("--bandwidth", type=float, metavar="GBS",
                   help="DRAM bandwidth per NUMA node, kept for the model (a capture has none)")
    p.add_argument("--blocks", type=lambda s: tuple(s.split(",")),
                   help=f"only these blocks, by priority: {','.join(BLOCKS)} (default all)")
    args = p.parse_args(argv)
    if args.blocks and set(args.blocks) - set(BLOCKS):
        p.error(f"--blocks: unknown {','.join(sorted(set(args.blocks) - set(BLOCKS)))}; "
                f"choose from {','.join(BLOCKS)}")
    if args.record and not args.out:
        p.error("--record needs --out FILE")
    if args.seeds < 1 or args.window <= 0:
        p.error("--seeds must be at least 1 and --window more than 0")
    if args.dry_run:
        from autotune.probe import probe
        topology = probe()
        space = resolve(load_space(find_space("cpu")), topology)
        print(plan_here(topology, space, args.budget - MARGIN_S, args.window, args.seeds,
                        args.quality_samples, args.bandwidth, args.blocks).text())
        return 0
    record(out=args.out, budget_s=args.budget, window_s=args.window, seeds=args.seeds,
           quality_samples=args.quality_samples, capture_dir=args.capture,
           bandwidth=args.bandwidth, blocks=args.blocks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
