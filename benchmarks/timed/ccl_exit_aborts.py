"""Do ccl ranks abort at exit? N real 2-rank ccl trials in a row, counting how each rank ended.

    python benchmarks/timed/ccl_exit_aborts.py --trials 50 --out benchmarks/results/ccl_exit_aborts.json

Each trial is a script trial as a search runs it (plan_trial, then the runner), of
benchmarks/workloads/ccl_exit.py: two ranks, one thread each, bound with taskset so each rank's
oneCCL progress thread shares its core with the rank's main thread. Script ranks leave through
Python's interpreter teardown (autotune's own worker leaves with os._exit and cannot abort
there), and the trials rotate through the ways a script ends (ccl_exit.STYLES). A rank counts
as aborted when it died of a signal the runner did not send (SIGABRT: exit code -6), exited
134, or its log shows an abort ("Aborted", "terminate called", "Fatal Python error"); crash
dumps (*.btr, core*) new in the working folder are counted too. The ccl build in use (its
source hash) is recorded, so a run of an older backend.cpp can be told apart.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]   # run by path too: the checkout, before any import of it
sys.path.insert(0, str(ROOT))

from autotune.comm import ccl  # noqa: E402
from autotune.config import Config  # noqa: E402
from autotune.probe import probe  # noqa: E402
from autotune.run.runner import run_plan  # noqa: E402
from autotune.script.spec import ScriptSpec  # noqa: E402
from autotune.run.trial import TrialSettings, plan_trial  # noqa: E402
from benchmarks.timed.machine import describe  # noqa: E402
from benchmarks.workloads.ccl_exit import STYLES  # noqa: E402

SCRIPT = ROOT / "benchmarks" / "workloads" / "ccl_exit.py"
ABORT_RE = re.compile(r"Aborted|terminate called|Fatal Python error|core dumped")
DUMP_GLOBS = ("*.btr", "core", "core.*")


def dumps(folder: Path) -> set[str]:
    return {p.name for pattern in DUMP_GLOBS for p in folder.glob(pattern)}


def aborted_ranks(codes, signalled, logs: list[str]) -> list[int]:
    """The ranks that ended by an abort of their own (not a signal the runner sent)."""
    out = []
    for r, code in enumerate(codes):
        by_signal = code is not None and code < 0 and r not in signalled
        if by_signal or code == 128 + signal.SIGABRT or ABORT_RE.search(logs[r]):
            out.append(r)
    return out


def one_trial(i: int, style: str, topology, results: Path, binding: str) -> dict:
    config = Config(nproc=2, threads=1, binding=binding, backend="ccl")
    spec = ScriptSpec.scanned((sys.executable, str(SCRIPT), "--exit", style),
                              metric=r"samples/s: ([0-9.]+)")
    settings = TrialSettings(script=spec, results_dir=str(results), timeout_s=180.0)
    plan = plan_trial(config, topology, settings, trial_id=f"exit-{i:03d}-{style}")
    run = run_plan(plan, idle_s=settings.idle_s)
    logs = [Path(rp.log_path).read_text(errors="replace") if Path(rp.log_path).exists() else ""
            for rp in plan.ranks]
    return {"trial": i, "style": style, "outcome": run.outcome, "exit_codes": list(run.exit_codes),
            "signalled": sorted(run.signalled), "notes": list(run.notes),
            "aborted_ranks": aborted_ranks(run.exit_codes, set(run.signalled), logs),
            "wall_s": round(run.wall_seconds, 1), "reason": run.reason[:300],
            "log_tails": [] if run.outcome == "ok" else [log[-800:] for log in logs]}


def run_trials(n: int, styles: list[str], topology, results: Path, binding: str) -> list[dict]:
    rows = []
    started = time.monotonic()
    for i in range(n):
        row = one_trial(i, styles[i % len(styles)], topology, results, binding)
        rows.append(row)
        print(f"[{time.monotonic() - started:6.0f}s] trial {i + 1}/{n} {row['style']:<15} "
              f"{row['outcome']:<7} exit codes {row['exit_codes']} "
              f"aborted {row['aborted_ranks'] or '-'}", flush=True)
    return rows


def summarize(rows: list[dict], dumps_found: list[str]) -> dict:
    by_style = {s: {"trials": 0, "aborted_trials": 0} for s in STYLES}
    for row in rows:
        by_style[row["style"]]["trials"] += 1
        by_style[row["style"]]["aborted_trials"] += bool(row["aborted_ranks"])
    return {"trials": len(rows), "rank_exits": sum(len(r["exit_codes"]) for r in rows),
            "aborted_trials": sum(bool(r["aborted_ranks"]) for r in rows),
            "aborted_ranks": sum(len(r["aborted_ranks"]) for r in rows),
            "not_ok_trials": sum(r["outcome"] != "ok" for r in rows),
            "crash_dumps": dumps_found, "by_style": by_style}


def build_facts() -> dict:
    path = ccl.cached_extension()
    return {"provider": ccl.provider(), "extension": str(path) if path else None,
            "source_key": path.parent.name if path else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=50, help="trials in a row (default 50)")
    p.add_argument("--styles", default=",".join(STYLES),
                   help=f"exit styles to rotate through, comma-separated (default: all: {','.join(STYLES)})")
    p.add_argument("--binding", default="taskset", help="the binding knob (default taskset)")
    p.add_argument("--label", default="", help="what this run measures, stored with it")
    p.add_argument("--out", help="JSON file for the rows and the summary")
    args = p.parse_args(argv)
    styles = [s for s in args.styles.split(",") if s]
    bad = [s for s in styles if s not in STYLES]
    if bad or not styles:
        print(f"ccl_exit_aborts: unknown --styles {','.join(bad) or '(none)'}; "
              f"choose from {','.join(STYLES)}", file=sys.stderr)
        return 2
    if args.trials < 1:
        print(f"ccl_exit_aborts: --trials {args.trials}: give 1 or more", file=sys.stderr)
        return 2
    if (why := ccl.problem()) is not None:
        print(f"ccl_exit_aborts: ccl is unavailable here: {why}", file=sys.stderr)
        return 2
    topology = probe()
    here, before = Path.cwd(), dumps(ROOT)
    with tempfile.TemporaryDirectory(prefix="ccl-exit-") as tmp:
        work = Path(tmp)
        os.chdir(work)   # the ranks' working folder: where a crash handler writes its dumps
        try:
            rows = run_trials(args.trials, styles, topology, work / "results", args.binding)
            found = sorted(dumps(work) | (dumps(ROOT) - before))
        finally:
            os.chdir(here)
    summary = summarize(rows, found)
    print(json.dumps(summary, indent=1))
    if args.out:
        record = {"benchmark": "ccl_exit_aborts", "label": args.label, "machine": describe(),
                  "command": " ".join(["python", "benchmarks/timed/ccl_exit_aborts.py",
                                              *(sys.argv[1:] if argv is None else argv)]),
                  "ccl": build_facts(), "binding": args.binding, "styles": styles,
                  "summary": summary, "rows": rows}
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
