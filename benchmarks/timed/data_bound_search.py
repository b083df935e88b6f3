"""Feeding a CPU's step (issue 51): a search on a data-bound entry point against the default
launch and against the best launch by hand, and the built-in cnn's first command, which must not
lose to the knob.

    python3 -m benchmarks.timed.data_bound_search --decode-ms 0.5 --budget 5m --rounds 6
    python3 -m benchmarks.timed.data_bound_search --decode-ms 2 --budget 5m --rounds 6
    python3 -m benchmarks.timed.data_bound_search --cnn --budget 10m     # the README's first command
    python3 -m benchmarks.timed.data_bound_search --decode-ms 0.5 --smoke   # does it run (no figures)

The entry point (benchmarks/workloads/data_bound.py) is the built-in cnn whose samples each cost
`--decode-ms` of CPU to make, as decoding an image does.

1. `autotune search --budget B --workload benchmarks.workloads.data_bound:build --json`, a
   subprocess in a fresh results folder, as a user runs it: its verified speedup, its
   recommendation and the summary's line on what fed the step; its progress is kept beside the
   JSON (.txt).
2. Side by side in one run: the default launch, the launches a user tries by hand after reading
   "data 75%" (BY_HAND, each in the default's math) and the search's recommendation, in rounds
   whose order turns each round; every ratio is per round, over the default's window of the same
   round (measure.stats.ratio_stats), so the machine's drift cancels. "Best by hand" is the by-hand
   launch with the highest median ratio.

`--cnn`: `autotune search --budget B --json` on the built-in workload, with the space it searched
(no dataloader_workers: the cnn makes its batches in the rank). Its verified figure is compared
with docs/benchmarks.md's for the same budget, within their spread.
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

from autotune.config import Config, describe_changes
from autotune.measure.split import Bottleneck, split_from
from autotune.measure.stats import Stats, ratio_stats

from benchmarks import RESULTS, ROOT

from .machine import describe as describe_machine

WORKLOAD = "benchmarks.workloads.data_bound:build"
# What a user tries by hand after reading "data 75%": DataLoader workers, and the rank's threads
# fitted beside them (issue 51's by-hand launches), all in the default launch's math.
BY_HAND = (Config(dataloader_workers=1, threads=1), Config(dataloader_workers=2, threads=1),
           Config(dataloader_workers=2))
SMOKE = ("--max-trials", "3", "--seconds", "1", "--verify-rounds", "1", "--quality-samples",
         "1024", "--quality-seeds", "2", "--allow-concurrent")   # a smoke run times nothing


def search(budget: str, *, workload: str | None, decode_ms: float | None, workdir: Path,
           smoke: bool) -> dict[str, Any]:
    """The real `autotune search` (a subprocess): its JSON summary and its progress text."""
    cmd = [sys.executable, "-m", "autotune", "search", "--budget", budget, "--json",
           "--results", str(workdir / "search")]
    cmd += ["--workload", workload] if workload else []
    cmd += list(SMOKE) if smoke else []
    env = {**os.environ, "PYTHONPATH": _with_root(os.environ.get("PYTHONPATH"))}
    if decode_ms is not None:
        env["DATA_BOUND_DECODE_MS"] = str(decode_ms)
    shown = (f"DATA_BOUND_DECODE_MS={decode_ms} " if decode_ms is not None else "") + \
        shlex.join(["autotune", *cmd[3:]])
    print("running:", shown, flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"autotune search failed (exit {proc.returncode}): "
                         f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    summary = json.loads(proc.stdout[proc.stdout.index("{"):])
    return {"command": shown, "summary": summary, "progress": proc.stderr}


def _with_root(path: str | None) -> str:
    """PYTHONPATH with the checkout first: the ranks import the entry point from benchmarks/
    (autotune's own Pythons leave the current folder off their path)."""
    return os.pathsep.join(p for p in (str(ROOT), path) if p)


def side_by_side(contenders: list[tuple[str, Config]], *, rounds: int, seconds: float,
                 decode_ms: float, workdir: Path) -> dict[str, dict[str, Any]]:
    """Each contender's windows, round by round (the order turns each round), with the split of
    its median window."""
    from autotune.probe import probe
    from autotune.run.evaluate import live_evaluator
    from autotune.run.trial import TrialSettings
    settings = TrialSettings(workload=WORKLOAD, workload_args={"decode_ms": decode_ms},
                             target_seconds=seconds, timeout_s=300.0,
                             results_dir=str(workdir / "side-by-side"))
    runs: dict[str, list[Any]] = {name: [] for name, _ in contenders}
    # the trials' ranks take this process's environment (the benchmark's own, not the library's)
    os.environ["PYTHONPATH"] = _with_root(os.environ.get("PYTHONPATH"))
    evaluate = live_evaluator(probe(None), settings, adapt_timeout=False)
    try:
        for r in range(rounds):
            turn = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
            for name, config in turn:
                out = evaluate(config, "throughput")
                if not out.ok:
                    raise SystemExit(f"{name} ({describe_changes(config)}): {out.outcome}: "
                                     f"{out.reason}")
                runs[name].append(out)
            print(f"round {r + 1}/{rounds}: " + ", ".join(
                f"{n} {v[-1].throughput:.0f}" for n, v in runs.items()), flush=True)
    finally:
        evaluate.close()
    return {name: _summarise(name, dict(contenders)[name], runs[name], runs["default"])
            for name in runs}


def _summarise(name: str, config: Config, runs: list[Any], default: list[Any]) -> dict[str, Any]:
    thr = [r.throughput for r in runs]
    ratio = ratio_stats(thr, [d.throughput for d in default])
    split = split_from(sorted(runs, key=lambda r: r.throughput)[len(runs) // 2].split)
    return {"config": describe_changes(config), "samples_per_s": round(Stats.of(thr).median, 1),
            "vs_default": round(ratio.median, 3), "vs_default_q1_q3": [round(ratio.q1, 3),
                                                                      round(ratio.q3, 3)],
            "ratios": [round(x, 3) for x in ratio.ratios],
            "data_share": round(split.part_share(Bottleneck.DATA), 3) if split else None}


def table(measured: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["| launch | samples/s (median) | vs default (median, q1-q3) | waits on data |",
             "|---|---|---|---|"]
    for name, m in measured.items():
        data = f"{m['data_share']:.0%}" if m["data_share"] is not None else "-"
        lines.append(f"| {name}: {m['config']} | {m['samples_per_s']:.0f} | {m['vs_default']:.2f}x "
                     f"({m['vs_default_q1_q3'][0]:.2f}-{m['vs_default_q1_q3'][1]:.2f}) | {data} |")
    return lines


def best_by_hand(measured: dict[str, dict[str, Any]]) -> str:
    return max((n for n in measured if n.startswith("by hand")),
               key=lambda n: measured[n]["vs_default"])


def entry_point(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    found = search(args.budget, workload=WORKLOAD, decode_ms=args.decode_ms, workdir=workdir,
                   smoke=args.smoke)
    summary = found["summary"]
    rec = summary.get("recommendation")
    contenders = [("default", Config())] + [(f"by hand {i + 1}", c) for i, c in enumerate(BY_HAND)]
    if rec:
        contenders.append(("search", Config.from_dict(rec["config"])))
    measured = side_by_side(contenders, rounds=args.rounds, seconds=args.seconds,
                            decode_ms=args.decode_ms, workdir=workdir)
    out: dict[str, Any] = {"search": found, "side_by_side": measured,
                           "best_by_hand": best_by_hand(measured)}
    if rec:
        hand = measured[out["best_by_hand"]]
        out["search_vs_best_by_hand"] = round(measured["search"]["vs_default"]
                                              / hand["vs_default"], 3)
    return out


def cnn(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """The built-in workload's first command, and the knobs of the space it searched."""
    from autotune.commands.search_job import prepare
    from autotune.tune import SearchRequest
    job = prepare(SearchRequest(budget_s=60.0, results=str(workdir)), label="cnn", topology=None,
                  cluster=None)
    return {"search": search(args.budget, workload=None, decode_ms=None, workdir=workdir,
                             smoke=args.smoke),
            "space_knobs": {k: list(v) for k, v in job.space.knobs.items()}}


def report(out: dict[str, Any]) -> list[str]:
    summary = out["search"]["summary"]
    rec = summary.get("recommendation") or {}
    lines = [f"search: {out['search']['command']}",
             f"  {summary.get('trials_run')} trials, stopped by {summary.get('stop_reason')}; "
             f"{rec.get('headline') or 'no recommendation'}"]
    lines += [f"  {line}" for line in summary.get("where_the_time_goes") or ()]
    if "space_knobs" in out:
        lines.append("  space: " + ", ".join(out["space_knobs"]) + " (dataloader_workers " +
                     ("offered)" if "dataloader_workers" in out["space_knobs"] else "not offered)"))
    if "side_by_side" in out:
        lines += ["", *table(out["side_by_side"]), "",
                  f"best by hand: {out['best_by_hand']}"]
        if "search_vs_best_by_hand" in out:
            lines.append(f"search / best by hand: {out['search_vs_best_by_hand']:.2f}x")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--decode-ms", type=float, default=0.5, help="CPU per sample (default 0.5)")
    p.add_argument("--cnn", action="store_true", help="the built-in cnn's first command instead")
    p.add_argument("--budget", default="5m")
    p.add_argument("--rounds", type=int, default=6, help="side-by-side rounds (default 6)")
    p.add_argument("--seconds", type=float, default=3.0, help="each side-by-side window")
    p.add_argument("--smoke", action="store_true",
                   help="a short functional run (3 trials, 1 round of 1 s): not a measurement")
    p.add_argument("--out", default=str(RESULTS), help="folder for the JSON and the progress")
    args = p.parse_args(argv)
    if args.smoke:
        args.rounds, args.seconds = 1, 1.0
    if args.decode_ms <= 0:
        print("data_bound_search: error: --decode-ms must be positive", file=sys.stderr)
        return 2
    tag = "cnn" if args.cnn else f"{args.decode_ms:g}ms"
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="data-bound-") as tmp:
        out = cnn(args, Path(tmp)) if args.cnn else entry_point(args, Path(tmp))
    out.update(machine=describe_machine(fingerprint=True), smoke=args.smoke,
               seconds=round(time.time() - t0, 1),
               command="python3 -m benchmarks.timed.data_bound_search " + " ".join(
                   argv if argv is not None else sys.argv[1:]))
    lines = report(out) + ([] if not args.smoke else ["SMOKE: a functional run, not a measurement"])
    print("\n".join(lines))
    stem = f"data_bound_search_{tag}{'_smoke' if args.smoke else ''}_{time.strftime('%Y-%m-%d')}"
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.txt").write_text(out["search"].pop("progress") + "\n" + "\n".join(lines)
                                        + "\n")
    (folder / f"{stem}.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {folder / stem}.json and .txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
