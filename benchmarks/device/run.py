"""The GPU machine's run, after scripts/device-run.sh installed the kit (issues 32, 33, 45).

    python -m benchmarks.device.run --out DIR [--cpu-only] [--gpu-budget 4m] [--cpu-budget 3m]
    python -m benchmarks.device.run --out DIR --phases landscape [--deadline 510s]

Phases, each time-boxed against one deadline and each leaving its results under DIR as soon as a
step ends (a phase that fails or is killed keeps what the others wrote). `machine` always runs
first; --phases names the others and their order (default gpu,cpu; PHASES below: a new phase is
a function and an entry there):
  machine  probe.json (`autotune probe --json`) and capture.tar (`autotune probe --capture`,
           with lscpu and nvidia-smi beside it), taken first so the simulator can predict the
           CPU search from the capture before anything is measured (issue 33)
  gpu      `autotune search` on the GPU space, its JSON summary, `export --format torchrun`,
           `report`, and the study with every trial's logs: gpu.tar. Skipped with one line when
           the probe finds no GPU (or --cpu-only)
  cpu      `autotune search --space cpu` on every core, `export`, `report`, an interleaved
           `autotune compare` of the winner against run_cpu's settings, and one comparison only
           a many-core machine answers (ranks per L3 group against ranks per NUMA node, or many
           single-thread ranks against one wide rank where the cores share one L3): cpu.tar
  resnet50 `autotune search --budget 450s --space gpu --workload resnet50` (issues 43, 44: where
           each step's time goes, the ceiling, the bottleneck first, quality sized by time,
           windows of a running launch), export, report: resnet50.tar
  windows  benchmarks/timed/window_cost.py on the GPU: a window's fixed cost fresh and in a running
           launch, and the split's own cost (issue 44): windows.tar
  landscape  benchmarks/landscapes/many_cores.py: the configurations that teach the landscape model most,
           each in two windows, the default launch in every block, seeded quality runs, with
           the capture inside: landscape-<fingerprint>.json and landscape.tar (issue 45)
DIR gets at most eight files (the device tool returns eight): kit.log, probe.json, capture.tar,
machine.tar (the probe's own output) and each phase's files (gpu.tar, cpu.tar; landscape.tar and
landscape-<fingerprint>.json). Each tar is appended to step by step, so a partial one still opens.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from autotune.config import changed_knobs
from autotune.search.budget import parse_budget
from benchmarks import ROOT

AUTOTUNE = [sys.executable, "-m", "autotune"]
# After a search's budget: its last trial may overrun, then export and report. Kept back from
# the deadline so a phase that runs late still leaves its archive.
SEARCH_GRACE_S = 75.0
# A compare window costs its seconds plus a launch (ranks start, warm up: about 10 s).
WINDOW_OVERHEAD_S = 10.0


class Kit:
    """The log, the deadline and the archives of one run."""

    def __init__(self, out: Path, deadline_s: float):
        self.out, self.t0, self.deadline_s = out, time.monotonic(), deadline_s
        self.log_path = out / "kit.log"
        self.capture: Path | None = None     # the machine phase's capture folder
        self.missing_gpu = False             # a GPU phase was asked for and none was found

    def left(self) -> float:
        return self.deadline_s - (time.monotonic() - self.t0)

    def log(self, msg: str) -> None:
        line = f"[{time.monotonic() - self.t0:6.1f}s] {msg}"
        print(line, flush=True)
        with open(self.log_path, "a") as f:
            f.write(line + "\n")

    def step(self, phase: str, name: str, argv: list[str], timeout: float,
             work: Path) -> subprocess.CompletedProcess | None:
        """Run one command, its output into work/<name>.out/.err, both appended to phase.tar."""
        timeout = min(timeout, self.left())
        if timeout < 5:
            self.log(f"{phase}: {name} skipped: the deadline is reached")
            return None
        self.log(f"{phase}: {name}: {' '.join(argv[2:])} (at most {timeout:.0f}s)")
        started = time.monotonic()
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  cwd=work)
        except subprocess.TimeoutExpired as exc:
            done = subprocess.CompletedProcess(argv, 124, _text(exc.stdout), _text(exc.stderr))
        (work / f"{name}.out").write_text(done.stdout or "")
        (work / f"{name}.err").write_text(done.stderr or "")
        self.archive(phase, [work / f"{name}.out", work / f"{name}.err"], work)
        last = (done.stderr or "").strip().splitlines()[-1:] or [""]
        self.log(f"{phase}: {name}: exit {done.returncode} after "
                 f"{time.monotonic() - started:.0f}s" + (f" ({last[0][:200]})"
                                                         if done.returncode else ""))
        return done

    def archive(self, phase: str, paths: list[Path], root: Path) -> None:
        with tarfile.open(self.out / f"{phase}.tar", "a") as tar:
            for p in paths:
                if p.exists():
                    tar.add(p, arcname=str(p.relative_to(root)))


def _text(b: bytes | str | None) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def machine_phase(kit: Kit, work: Path) -> dict[str, Any]:
    done = kit.step("machine", "probe", [*AUTOTUNE, "probe", "--json"], 120, work)
    probe = json.loads(done.stdout) if done and done.returncode == 0 else {}
    (kit.out / "probe.json").write_text(json.dumps(probe, indent=1))
    cap = work / "capture"
    kit.step("machine", "capture", [*AUTOTUNE, "probe", "--capture", str(cap)], 120, work)
    kit.capture = cap if cap.is_dir() else None
    extras = {"lscpu": ["lscpu"], "nvidia-smi": ["nvidia-smi"], "date": ["date", "-u"],
              "torch": [sys.executable, "-c", "import torch; print(torch.__version__, "
                        "torch.version.cuda, torch.cuda.is_available())"]}
    for name, argv in extras.items():
        try:
            text = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired) as exc:
            text = f"{argv[0]}: {exc}\n"
        (work / f"{name}.txt").write_text(text)
    with tarfile.open(kit.out / "capture.tar", "w") as tar:
        for p in [cap, *(work / f"{n}.txt" for n in extras)]:
            if p.exists():
                tar.add(p, arcname=p.name)
    return probe


def search_phase(kit: Kit, phase: str, work: Path, budget_s: float,
                 space: str, export_format: str, workload: str | None = None) -> dict[str, Any]:
    """A search and what a user reads after it; returns `report --json` ({} when it failed)."""
    results = work / "results"
    kit.step(phase, "search", [*AUTOTUNE, "search", "--budget", f"{budget_s:.0f}s",
                               "--space", space, "--results", str(results), "--json",
                               *(["--workload", workload] if workload else [])],
             budget_s + SEARCH_GRACE_S, work)
    kit.step(phase, "export", [*AUTOTUNE, "export", "--format", export_format,
                               "--results", str(results)], 60, work)
    kit.step(phase, "report", [*AUTOTUNE, "report", "--results", str(results)], 60, work)
    done = kit.step(phase, "report-json", [*AUTOTUNE, "report", "--results", str(results),
                                           "--json", "--top", "1000"], 60, work)
    kit.archive(phase, [results], work)
    try:
        return json.loads(done.stdout) if done and done.returncode == 0 else {}
    except json.JSONDecodeError:
        return {}


def layout_comparison(probe: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The layouts only a many-core machine can tell apart, as --a/--b knobs and a label."""
    nodes = max(1, len([n for n in probe.get("numa_nodes", []) if n.get("cpus")]))
    cores = int(probe.get("usable_physical_cores") or 1)
    l3 = len(probe.get("l3_domains") or [])
    per_node = max(1, cores // nodes)

    def ranks(per: int) -> dict[str, Any]:   # ranks_per_numa_node counts ranks per NUMA node
        return {"nproc": per * nodes, "ranks_per_numa_node": per, "threads": max(1, per_node // per)}
    if l3 > nodes and l3 % nodes == 0:
        return (ranks(l3 // nodes), ranks(1),
                f"one rank per L3 group ({l3} groups) against one rank per NUMA node ({nodes})")
    return (ranks(per_node), ranks(1),
            f"{per_node} single-thread ranks per NUMA node against one rank per node with its "
            f"{per_node} cores as threads (the cores share {max(l3, 1)} L3 group(s))")


def compare(kit: Kit, work: Path, name: str, a: dict[str, Any], b: dict[str, Any],
            common: dict[str, Any], args: argparse.Namespace) -> None:
    argv = [*AUTOTUNE, "compare", "--rounds", str(args.compare_rounds), "--seconds",
            str(args.compare_seconds), "--json", "--results", str(work / f"{name}-results")]
    argv += [x for k, v in a.items() for x in ("--a", f"{k}={v}")]
    argv += [x for k, v in b.items() for x in ("--b", f"{k}={v}")]
    argv += [x for k, v in common.items() for x in ("--set", f"{k}={v}")]
    kit.step("cpu", name, argv, compare_s(args) + 30, work)


def compare_s(args: argparse.Namespace) -> float:
    """One comparison's time: rounds of an A and a B window."""
    return args.compare_rounds * 2 * (args.compare_seconds + WINDOW_OVERHEAD_S)


def cpu_phase(kit: Kit, work: Path, probe: dict[str, Any], args: argparse.Namespace) -> None:
    budget = min(args.cpu_budget, kit.left() - SEARCH_GRACE_S - 2 * compare_s(args))
    if budget < 60:
        kit.log(f"cpu: skipped: {kit.left():.0f}s left before the deadline, too little for a "
                "search and its comparisons")
        return
    if budget < args.cpu_budget:
        kit.log(f"cpu: budget cut to {budget:.0f}s to end before the deadline")
    report = search_phase(kit, "cpu", work, budget, "cpu", "shell")
    rec = (report.get("recommendation") or {}).get("config") or {}
    run_cpu = next((t.get("changes") or {} for t in report.get("top", [])
                    if t.get("role") == "reference:run_cpu"), None)
    winner = changed_knobs(rec)
    if rec and run_cpu is not None:
        kit.log(f"cpu: comparing the winner ({winner or 'the default launch'}) with run_cpu's "
                f"settings ({run_cpu})")
        # --a needs one knob: the default launch is spelled by its binding
        compare(kit, work, "compare-winner-run_cpu", winner or {"binding": "none"}, run_cpu,
                {}, args)
    else:
        kit.log("cpu: no winner or no run_cpu reference stored; that comparison is skipped")
    a, b, label = layout_comparison(probe)
    common = {k: v for k, v in winner.items()
              if k in ("allocator", "omp_runtime", "precision", "global_batch", "backend")}
    common["binding"] = "numactl" if probe.get("numactl") else "taskset"
    kit.log(f"cpu: layout comparison: {label}; A={a} B={b} both with {common}")
    compare(kit, work, "compare-layout", a, b, common, args)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.device.run",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for the results (the device's $OUT)")
    p.add_argument("--gpu-budget", default="4m", type=parse_budget)
    p.add_argument("--resnet50-budget", default="450s", type=parse_budget,
                   help="resnet50: the search's budget (issue 43's 7.5 minutes)")
    p.add_argument("--cpu-budget", default="3m",
                   type=lambda s: 0.0 if s == "0" else parse_budget(s))
    p.add_argument("--cpu-only", action="store_true", help="skip the GPU phase")
    p.add_argument("--deadline", default="9m", type=parse_budget,
                   help="everything ends by then, counted from this command's start")
    p.add_argument("--compare-rounds", type=int, default=3)
    p.add_argument("--compare-seconds", type=float, default=5.0)
    p.add_argument("--phases", default="gpu,cpu", type=_phases,
                   help=f"after the machine phase, in order: {', '.join(PHASES)} (gpu,cpu)")
    p.add_argument("--landscape-window", type=float, default=3.0,
                   help="landscape: timed seconds a window (3)")
    p.add_argument("--bandwidth", type=float, metavar="GBS",
                   help="landscape: DRAM bandwidth per NUMA node, kept for the model")
    return p.parse_args(argv)


def _phases(text: str) -> list[str]:
    names = [n for n in text.split(",") if n]
    unknown = [n for n in names if n not in PHASES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown phase {','.join(unknown) or repr(text)}; "
                                         f"choose from {', '.join(PHASES)}")
    return names


def gpu_phase(kit: Kit, work: Path, probe: dict[str, Any], args: argparse.Namespace) -> None:
    gpus = len(probe.get("gpus") or []) if probe.get("cuda") else 0
    if args.cpu_only:
        kit.log("gpu: skipped (--cpu-only)")
    elif not gpus:
        kit.log("gpu: skipped: the probe found no GPU usable by torch; the CPU phase still runs")
        kit.missing_gpu = True
    else:
        search_phase(kit, "gpu", work, args.gpu_budget, "gpu", "torchrun")


def resnet50_phase(kit: Kit, work: Path, probe: dict[str, Any], args: argparse.Namespace) -> None:
    """Issue 43's search: torchvision's resnet50 with the built-in augmented pipeline."""
    if not (probe.get("cuda") and probe.get("gpus")):
        kit.log("resnet50: skipped: the probe found no GPU usable by torch")
        kit.missing_gpu = True
        return
    search_phase(kit, "resnet50", work, args.resnet50_budget, "gpu", "torchrun",
                 workload="resnet50")


def windows_phase(kit: Kit, work: Path, probe: dict[str, Any], args: argparse.Namespace) -> None:
    """A window's fixed cost fresh and in a running launch, and the split's cost, on the GPU."""
    gpu = ["--gpu"] if probe.get("cuda") and probe.get("gpus") else []
    kit.step("windows", "window-cost", [sys.executable, "-m", "benchmarks.timed.window_cost",
                                        "--rounds", "3", "--out", str(work), *gpu],
             min(300.0, kit.left() - 10), work)
    kit.archive("windows", [work], work)


def cpu_search_phase(kit: Kit, work: Path, probe: dict[str, Any], args: argparse.Namespace) -> None:
    if args.cpu_budget > 0:
        cpu_phase(kit, work, probe, args)
    else:
        kit.log("cpu: skipped (--cpu-budget 0)")


def landscape_phase(kit: Kit, work: Path, probe: dict[str, Any], args: argparse.Namespace) -> None:
    from benchmarks.landscapes.many_cores import device_phase
    device_phase(kit, work, probe, args)


# What --phases can name: a function (kit, its work folder, the probe's JSON, the arguments).
PHASES = {"gpu": gpu_phase, "cpu": cpu_search_phase, "landscape": landscape_phase,
          "resnet50": resnet50_phase, "windows": windows_phase}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    kit = Kit(out, args.deadline)
    work = Path(tempfile.mkdtemp(prefix="autotune-kit-"))
    kit.log(f"kit: autotune from {ROOT}, python "
            f"{sys.version.split()[0]}, work in {work}")
    (work / "machine").mkdir()
    probe = machine_phase(kit, work / "machine")
    for name in args.phases:
        (work / name).mkdir(exist_ok=True)
        PHASES[name](kit, work / name, probe, args)
    kit.log(f"kit: done; results in {out}: {', '.join(sorted(os.listdir(out)))}")
    shutil.rmtree(work, ignore_errors=True)
    if kit.missing_gpu:   # the run did what it could, but not what was asked (issue 32: exit 2)
        print("device-run: no GPU found: the GPU phase was skipped (--cpu-only says that is "
              "intended)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
