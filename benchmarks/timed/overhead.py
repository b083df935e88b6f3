"""What a trial costs besides the measurement itself, and how precise one trial is.

    python3 -m benchmarks.timed.overhead --repeats 10 --seconds 5          # ~2 minutes
    python3 -m benchmarks.timed.overhead --repeats 2 --seconds 1 --set threads=1

  start-up        launch -> first timed step (slowest rank), per trial
  timed share     timed window / trial wall time (the rest is start-up, warmup, teardown)
  spread          throughput CV of one configuration repeated N times, run after run
  own overhead    autotune's sampler ask + storage writes per trial: a replay of a landscape
                  (this machine's, else a synthetic one) with a real SQLite file, timing
                  run_search minus the time spent inside the (table-lookup) evaluation.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autotune.result import Outcome
from autotune.config import Config, parse_sets
from autotune.measure.stats import Stats

from benchmarks import RESULTS
from benchmarks.landscapes.synthetic import synthetic
from benchmarks.landscapes.table import DATA, Landscape, SimClock



def repeat_trials(config: Config, repeats: int, seconds: float, workload: str,
                  workdir: Path) -> dict[str, Any]:
    from autotune.probe import probe
    from autotune.run.trial import TrialSettings, run_trial
    topology = probe()
    settings = TrialSettings(workload=workload, target_seconds=seconds,
                             timeout_s=max(60.0, 20 * seconds), results_dir=str(workdir))
    rows = []
    for i in range(repeats):
        out = run_trial(config, topology, settings)
        rows.append({"outcome": out.outcome, "wall_s": out.seconds, "throughput": out.throughput,
                     "startup_s": out.startup_s, "timed_share": out.timed_share,
                     "cpu_share": out.cpu_share})
        print(f"repeat {i + 1}/{repeats}: {rows[-1]['throughput'] or out.outcome}", flush=True)
    ok = [r for r in rows if r["outcome"] == Outcome.OK and r["throughput"]]

    def stats(key: str) -> dict[str, float] | None:
        vals = [r[key] for r in ok if r[key] is not None]
        return Stats.of(vals).to_dict() if vals else None
    return {"config": config.to_dict(), "repeats": repeats, "ok": len(ok), "seconds": seconds,
            "throughput": stats("throughput"), "startup_s": stats("startup_s"),
            "timed_share": stats("timed_share"), "wall_s": stats("wall_s"),
            "cpu_share": stats("cpu_share"), "rows": rows}


def own_overhead(land: Landscape, trials: int, workdir: Path) -> dict[str, Any]:
    """Replay with a real SQLite study: everything run_search does except running trials."""
    from autotune.search.loop import run_search
    from autotune.search.options import SearchOptions
    from autotune.search.references import make_sampler
    from autotune.study.storage import open_storage, open_study
    clock = SimClock()
    table = land.evaluator(clock)
    spent = {"eval": 0.0, "calls": 0}

    def evaluate(config: Config, mode: str, **kw):
        t0 = time.perf_counter()
        try:
            return table(config, mode, **kw)
        finally:
            spent["eval"] += time.perf_counter() - t0
            spent["calls"] += 1
    db = workdir / "overhead.db"
    db.unlink(missing_ok=True)
    study = open_study(open_storage(f"sqlite:///{db}"), "overhead", sampler=make_sampler(0))
    started = time.perf_counter()
    res = run_search(study, space=land.space(), topology=land.topology(), evaluate=evaluate,
                     clock=clock, options=SearchOptions(budget_s=1e12, min_trial_s=0.0,
                                                        patience=10**9, max_trials=trials))
    wall = time.perf_counter() - started
    stored = len(study.trials)
    own = wall - spent["eval"]
    return {"landscape": land.data.get("fingerprint"), "storage": "sqlite (WAL)",
            "launched": res.measured, "stored_trials": stored, "wall_s": wall,
            "evaluation_s": spent["eval"], "own_s": own,
            "own_s_per_launched": own / max(1, res.measured),
            "own_s_per_stored": own / max(1, stored)}


def table(out: dict[str, Any]) -> str:
    lines = []
    rep = out.get("repeat")
    if rep:
        def med(key: str, fmt: str) -> str:
            s = rep.get(key)
            return format(s["median"], fmt) if s else "n/a"
        thr = rep.get("throughput")
        lines += [f"one configuration x {rep['repeats']} ({rep['ok']} ok), {rep['seconds']:g}s windows",
                  f"  start-up (launch -> first step)  median {med('startup_s', '.2f')} s",
                  f"  trial wall time                  median {med('wall_s', '.2f')} s",
                  f"  share of trial in timed window   median {med('timed_share', '.0%')}",
                  "  run-to-run throughput CV         " +
                  (f"{thr['cv']:.1%} (median {thr['median']:.1f} samples/s)" if thr else "n/a"),
                  f"  cpu share received               median {med('cpu_share', '.2f')}"]
    own = out.get("own")
    if own:
        lines += [f"autotune's own overhead (replay of {own['landscape']}, {own['launched']} "
                  f"launched / {own['stored_trials']} stored trials, {own['storage']})",
                  f"  per launched trial               {own['own_s_per_launched'] * 1000:.0f} ms",
                  f"  per stored trial                 {own['own_s_per_stored'] * 1000:.0f} ms"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.timed.overhead", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--set", action="append", metavar="KNOB=VALUE",
                   help="the configuration to repeat (default: the default launch)")
    p.add_argument("--workload", default="cnn")
    p.add_argument("--replay-trials", type=int, default=100,
                   help="launched trials in the own-overhead replay (default 100)")
    p.add_argument("--landscape", help="landscape to replay (default: this machine's, else "
                                       "synthetic)")
    p.add_argument("--skip-trials", action="store_true", help="only the replay (no processes)")
    p.add_argument("--out", default=str(RESULTS / "overhead.json"))
    args = p.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="autotune-overhead-"))
    out: dict[str, Any] = {}
    if not args.skip_trials and args.repeats > 0:
        out["repeat"] = repeat_trials(parse_sets(args.set or []), args.repeats, args.seconds,
                                      args.workload, workdir / "trials")
    land = Landscape.load(args.landscape) if args.landscape else _mine_or_synthetic()
    out["own"] = own_overhead(land, args.replay_trials, workdir)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(table(out))
    print(f"wrote {args.out}")
    return 0


def _mine_or_synthetic() -> Landscape:
    from autotune.probe import probe
    mine = DATA / f"landscape-{probe(collect_capabilities=False).fingerprint()}.json"
    return Landscape.load(mine) if mine.exists() else synthetic("formula")


if __name__ == "__main__":
    sys.exit(main())
