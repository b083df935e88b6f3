"""The recommended configuration against what a user would otherwise run, interleaved in one run.

    python3 -m benchmarks.timed.speedup --budget 30m --rounds 5            # runs `autotune search` first
    python3 -m benchmarks.timed.speedup --storage sqlite:///autotune-results/autotune.db --rounds 5
    python3 -m benchmarks.timed.speedup --set nproc=2 --set threads=1 --rounds 1 --seconds 1   # given

Contenders, measured in rounds A B C D / D C B A (so drift and position effects cancel), each
with the same built-in workload and timed window:

  default   the default launch (one process, torch's defaults)
  run_cpu   `python -m torch.backends.xeon.run_cpu` with its defaults, running the worker's
            standalone mode (`python -m autotune.worker --workload cnn --seconds S`, through
            benchmarks/timed/run_worker.py: run_cpu only launches .py files). run_cpu
            looks for lib{tcmalloc,jemalloc,iomp5}.so in $CONDA_PREFIX/lib, $VIRTUAL_ENV/lib,
            ~/.local/lib, /usr/local/lib{,64}, /usr/lib{,64}; Debian installs libtcmalloc.so.4 in
            /usr/lib/x86_64-linux-gnu and pip's intel-openmp puts libiomp5.so under the Python
            prefix, so by default it finds none of them. As a user in a virtualenv would, we
            symlink the libraries the probe found into <work>/prefix/lib/lib*.so and set
            VIRTUAL_ENV=<work>/prefix for run_cpu only (nothing under ~ or /usr is touched).
  oracle    the best configuration of the recorded landscape within the accuracy tolerance
            (benchmarks/landscapes/data/landscape-<fingerprint>.json), when there is one.

Each ratio is recommendation / contender per round (autotune.measure.stats.ratio_stats): median and
half-IQR. Target: recommendation / oracle >= 0.97.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autotune.result import Outcome
from autotune.config import Config, parse_sets
from autotune.measure.stats import Stats, ratio_stats
from autotune.probe.topology import Topology

from benchmarks import RESULTS, ROOT
from benchmarks.landscapes.table import DATA, Landscape

TARGET = 0.97


def recommendation_from_search(budget: str, seconds: float | None, workdir: Path,
                               storage: str | None) -> tuple[Config, dict[str, Any]]:
    """Run the real `autotune search` (a subprocess, as a user runs it) and read its JSON."""
    url = storage or f"sqlite:///{workdir / 'speedup-search.db'}"
    cmd = [sys.executable, "-m", "autotune", "search", "--budget", budget, "--json",
           "--storage", url, "--results", str(workdir / "search")]
    if seconds:
        cmd += ["--seconds", str(seconds)]
    print("running:", shlex.join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"autotune search failed (exit {proc.returncode}): "
                         f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    summary = json.loads(proc.stdout[proc.stdout.index("{"):])
    rec = summary.get("recommendation")
    if not rec:
        raise SystemExit("autotune search gave no recommendation")
    return Config.from_dict(rec["config"]), {"source": "search", "command": shlex.join(cmd),
                                             "summary": {k: summary[k] for k in
                                                         ("study", "stop_reason", "trials_run",
                                                          "elapsed_s")}, "recommendation": rec}


def recommendation_from_storage(url: str) -> tuple[Config, dict[str, Any]]:
    import optuna

    from autotune.probe import probe, torch_build
    from autotune.study.attrs import StudyAttrs
    from autotune.study.provenance import Here, why_not_here
    from autotune.study.storage import find_study, open_storage
    storage = open_storage(url)
    here = Here(topology=probe(collect_capabilities=False), torch=torch_build())
    study = optuna.load_study(study_name=find_study(storage, None, here=here), storage=storage)
    elsewhere = why_not_here(study.user_attrs, here)
    if elsewhere:
        # its recommendation was tuned for another machine: timing it here says nothing
        raise SystemExit(f"{url}: study {study.study_name} is not this machine's: it was "
                         f"{elsewhere}; run the search here (add --search)")
    rec = StudyAttrs.of(study).recommendation
    if not rec:
        raise SystemExit(f"{url}: study {study.study_name} has no stored recommendation")
    return Config.from_dict(rec["config"]), {"source": "storage", "study": study.study_name,
                                             "recommendation": rec}


def oracle_config(topology: Topology, max_drop: float, path: str | None) -> tuple[Config | None, Any]:
    p = Path(path) if path else DATA / f"landscape-{topology.fingerprint()}.json"
    if not p.exists():
        return None, None
    land = Landscape.load(p)
    thr, row = land.oracle(max_drop)
    if row is None:
        return None, None
    return Config.from_dict(row["config"]), {"landscape": str(p), "recorded_throughput": thr,
                                             "missing_rows": land.missing()}


def run_cpu_prefix(topology: Topology, workdir: Path) -> Path:
    """A fake virtualenv prefix whose lib/ holds the names run_cpu looks for."""
    lib = workdir / "prefix" / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    caps = topology.capabilities
    found = {"tcmalloc": caps.allocators.get("tcmalloc"), "jemalloc": caps.allocators.get("jemalloc"),
             "iomp5": caps.omp_runtimes.get("libiomp5")}
    for name, target in found.items():
        link = lib / f"lib{name}.so"
        if target and not link.exists():
            link.symlink_to(target)
    return workdir / "prefix"


def measure_run_cpu(seconds: float, workload: str, prefix: Path, workdir: Path,
                    timeout: float) -> dict[str, Any]:
    """One run of run_cpu with its defaults around the worker's standalone mode."""
    result = workdir / f"run_cpu-{time.time_ns()}.json"
    env = {**os.environ, "VIRTUAL_ENV": str(prefix), "AUTOTUNE_RESULT": str(result),
           "PYTHONPATH": str(ROOT)}
    for owned in ("LD_PRELOAD", "OMP_NUM_THREADS", "KMP_AFFINITY", "KMP_BLOCKTIME", "MALLOC_CONF"):
        env.pop(owned, None)  # run_cpu decides these; inherited ones would change its choice
    cmd = [sys.executable, "-m", "torch.backends.xeon.run_cpu",
           str(Path(__file__).resolve().parent / "run_worker.py"), "--workload", workload, "--seconds", str(seconds)]
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout, start_new_session=True)
    except subprocess.TimeoutExpired:
        return {"outcome": Outcome.TIMEOUT, "throughput": None, "seconds": timeout}
    wall = time.monotonic() - started
    log = proc.stdout + proc.stderr
    preload = [ln.strip() for ln in log.splitlines() if "LD_PRELOAD" in ln or "numactl" in ln]
    data = None
    if result.exists():
        try:
            data = json.loads(result.read_text())
        except ValueError:
            data = None
    if data is None:  # no result file: the standalone mode may print its result JSON instead
        for line in reversed(proc.stdout.splitlines()):
            if line.startswith("{") and "throughput" in line:
                try:
                    data = json.loads(line)
                    break
                except ValueError:
                    continue
    if data and data.get("status", "ok") == "ok" and data.get("throughput"):
        return {"outcome": Outcome.OK, "throughput": float(data["throughput"]), "seconds": wall,
                "launcher_log": preload[-6:]}
    if "unrecognized arguments" in log or "--request" in log and "required" in log:
        why = "the worker has no standalone mode (--workload/--seconds) yet"
    else:
        why = (log.strip().splitlines() or [f"exit {proc.returncode}, no result"])[-1]
    return {"outcome": Outcome.UNAVAILABLE if "standalone" in why else Outcome.CRASH, "throughput": None,
            "seconds": wall, "reason": why[:300], "command": shlex.join(cmd)}


def measure(config: Config, topology: Topology, settings) -> dict[str, Any]:
    from autotune.run.trial import run_trial
    out = run_trial(config, topology, settings)
    return {"outcome": out.outcome, "throughput": out.throughput, "seconds": out.seconds,
            "cpu_share": out.cpu_share, "reason": out.reason[:300]}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from autotune.probe import probe
    from autotune.run.trial import TrialSettings

    topology = probe()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="autotune-speedup-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.set:
        rec, source = parse_sets(args.set), {"source": "given", "sets": args.set}
    elif args.storage and not args.search:
        rec, source = recommendation_from_storage(args.storage)
    else:
        rec, source = recommendation_from_search(args.budget, args.search_seconds, workdir,
                                                 args.storage)
    oracle, oracle_info = (None, None) if args.no_oracle else \
        oracle_config(topology, args.max_accuracy_drop, args.landscape)
    settings = TrialSettings(workload=args.workload, target_seconds=args.seconds,
                             timeout_s=max(60.0, 20 * args.seconds),
                             results_dir=str(workdir / "trials"))
    prefix = run_cpu_prefix(topology, workdir)
    lineup: list[tuple[str, Any]] = [("recommendation", rec), ("default", Config())]
    if not args.no_run_cpu:
        lineup.append(("run_cpu", None))
    if oracle is not None:
        lineup.append(("oracle", oracle))
    raw: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in lineup}
    for rnd in range(args.rounds):
        order = lineup if rnd % 2 == 0 else lineup[::-1]
        for name, config in order:
            got = measure_run_cpu(args.seconds, args.workload, prefix, workdir,
                                  settings.timeout_s) if config is None \
                else measure(config, topology, settings)
            raw[name].append(got)
            thr = f"{got['throughput']:.1f}/s" if got["throughput"] else got["outcome"]
            print(f"round {rnd + 1}/{args.rounds} {name:<15} {thr}", flush=True)
    ratios: dict[str, Any] = {}
    a = raw["recommendation"]
    for name, _ in lineup[1:]:
        pairs = [(x["throughput"], y["throughput"]) for x, y in zip(a, raw[name])
                 if x["throughput"] and y["throughput"]]
        if not pairs:
            why = next((y.get("reason") for y in raw[name] if y.get("reason")), "no ok round")
            ratios[name] = {"median": None, "spread": None, "rounds": 0, "reason": why}
            continue
        rs = ratio_stats([p[0] for p in pairs], [p[1] for p in pairs])
        ratios[name] = {"median": rs.median, "spread": rs.spread, "q1": rs.q1, "q3": rs.q3,
                        "rounds": rs.n, "ratios": list(rs.ratios)}
    vs_oracle = ratios.get("oracle", {}).get("median")
    out = {"machine": topology.isa.describe(), "fingerprint": topology.fingerprint(),
           "workload": args.workload, "seconds": args.seconds, "rounds": args.rounds,
           "recommendation": {"config": rec.to_dict(), **source},
           "oracle": {"config": oracle.to_dict(), **oracle_info} if oracle else None,
           "run_cpu": {"prefix": str(prefix), "how": "VIRTUAL_ENV=<prefix>, lib*.so symlinks"},
           "ratios": ratios, "raw": raw,
           "target": {"vs_oracle_at_least": TARGET, "value": vs_oracle,
                      "met": None if vs_oracle is None else vs_oracle >= TARGET},
           "median_throughput": {n: Stats.of([x["throughput"] for x in v if x["throughput"]]).median
                                 for n, v in raw.items() if any(x["throughput"] for x in v)}}
    return out


def table(out: dict[str, Any]) -> str:
    lines = [f"recommendation ({out['recommendation']['source']}): "
             f"{_short(out['recommendation']['config'])}",
             f"{out['rounds']} interleaved round(s) of {out['seconds']:g}s windows, "
             f"workload {out['workload']}",
             f"{'recommendation vs':<18}{'ratio':>8}{'±':>7}{'rounds':>8}"]
    for name, r in out["ratios"].items():
        if r["median"] is None:
            lines.append(f"{name:<18}{'n/a':>8}{'':>7}{0:>8}  ({r['reason']})")
        else:
            lines.append(f"{name:<18}{r['median']:>8.3f}{r['spread']:>7.3f}{r['rounds']:>8}")
    t = out["target"]
    lines.append("target vs oracle >= 0.97: " + ("no oracle (record a landscape first)"
                                                  if t["value"] is None else
                                                  f"{t['value']:.3f} {'met' if t['met'] else 'MISSED'}"))
    return "\n".join(lines)


def _short(d: dict[str, Any]) -> str:
    base = Config().to_dict()
    return " ".join(f"{k}={v}" for k, v in d.items() if v != base[k]) or "(default launch)"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.timed.speedup", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--set", action="append", metavar="KNOB=VALUE",
                   help="measure this configuration instead of searching (repeatable)")
    p.add_argument("--storage", help="read the recommendation stored by an earlier search here")
    p.add_argument("--search", action="store_true",
                   help="run the search even with --storage (it then stores into that URL)")
    p.add_argument("--budget", default="30m", help="search budget when searching (default 30m)")
    p.add_argument("--search-seconds", type=float, help="--seconds passed to the search")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=5.0, help="timed window per measurement")
    p.add_argument("--workload", default="cnn")
    p.add_argument("--landscape", help="landscape for the oracle (default: this machine's)")
    p.add_argument("--no-oracle", action="store_true")
    p.add_argument("--no-run-cpu", action="store_true")
    p.add_argument("--max-accuracy-drop", type=float, default=1.0)
    p.add_argument("--workdir", help="where trials, the run_cpu prefix and the search go")
    p.add_argument("--out", default=str(RESULTS / "speedup.json"))
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    out = run(args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(table(out))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
