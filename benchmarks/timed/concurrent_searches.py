"""Two `autotune search --allow-concurrent` in one results folder: how many trials are stored as
failed (crash, oom, timeout; or interrupted) that did not fail on their own?

    python3 -m benchmarks.timed.concurrent_searches --repeats 10 --budget 60s     # ~13 minutes

Each repetition starts two searches with the installed `autotune` command (its process is named
`autotune`, as a user's is) in a fresh folder, the second `--stagger` seconds after the first:
the second search then starts while the first one's trial runs, which is when a starting search
used to take the first one's live ranks for orphans and kill them (issue 34), stored as
`oom: rank 0 killed by SIGKILL not sent by autotune`. The default workload does not fail on its
own here, so every such trial is a false failure. Prints one line per repetition and the total.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna

FAILED = ("crash", "oom", "timeout", "interrupted")


def autotune_command() -> str:
    """The installed entry point beside this interpreter (named `autotune`, like a user's)."""
    path = Path(sys.executable).parent / "autotune"
    if not path.exists():
        sys.exit(f"no {path}: run ./setup.sh first")
    return str(path)


def one_pair(folder: Path, budget: str, stagger: float) -> tuple[list[int], list[dict]]:
    """(the two searches' exit codes, every trial of the study they share)."""
    argv = [autotune_command(), "search", "--budget", budget, "--allow-concurrent",
            "--results", str(folder), "--quiet"]
    procs = []
    for i in range(2):
        if i:
            time.sleep(stagger)
        log = open(folder / f"search{i}.log", "wb")
        procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL))
    codes = [p.wait() for p in procs]
    for i, code in enumerate(codes):
        if code:
            tail = (folder / f"search{i}.log").read_text(errors="replace").strip()[-400:]
            print(f"    search {i} exited {code}: {tail}", flush=True)
    storage = f"sqlite:///{folder / 'autotune.db'}"
    trials = []
    for summary in optuna.get_all_study_summaries(storage):
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        trials += [{"number": t.number, "outcome": t.user_attrs.get("outcome"),
                    "reason": t.user_attrs.get("reason", "")} for t in study.trials]
    return codes, trials


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--budget", default="60s")
    ap.add_argument("--stagger", type=float, default=8.0,
                    help="seconds between the two starts (default 8, as in the issue)")
    ap.add_argument("--out", help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rows, false_failures, measured = [], 0, 0
    for rep in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="concurrent-") as tmp:
            codes, trials = one_pair(Path(tmp), args.budget, args.stagger)
        bad = [t for t in trials if t["outcome"] in FAILED]
        false_failures += len(bad)
        measured += len(trials)
        rows.append({"repeat": rep + 1, "trials": len(trials), "false_failures": bad,
                     "exit_codes": codes})
        print(f"repeat {rep + 1}/{args.repeats}: {len(trials)} trials, {len(bad)} failed"
              + "".join(f"\n    trial {t['number']}: {t['outcome']}: {t['reason'][:160]}"
                        for t in bad) + f" (exit codes {codes})", flush=True)
    print(f"false failures (crash, oom, timeout, interrupted): {false_failures} in {measured} "
          f"trials over {args.repeats} repetitions of two searches "
          f"(--budget {args.budget}, second started {args.stagger:g} s after the first)")
    if args.out:
        Path(args.out).write_text(json.dumps({"argv": sys.argv, "rows": rows,
                                              "false_failures": false_failures}, indent=1))
    return 0 if false_failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
