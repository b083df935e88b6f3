"""A 2-host window's fixed cost against a fresh 2-host start, interleaved (issue 54), and the
8-minute search over two hosts that the lead runs before and after.

    scripts/testhosts.sh up 2                                       # two namespace hosts (root)
    python3 -m benchmarks.timed.hosts_window_cost --ssh-config /tmp/autotune-testhosts/ssh_config \\
        --rounds 5                                                  # ~5 minutes on 2 cores
    python3 -m benchmarks.timed.hosts_window_cost --ssh-config ... --search 8m [--before DIR]

Fixed cost (default): the same 2-host launch (1 rank per host, 1 thread, taskset, gloo, the
built-in CNN) run in rounds A B / B A: a fresh trial (run_trial without kept launches: ssh,
imports, process group, model, warm-up, teardown on both hosts) against windows, in a launch
kept running on both hosts, of knobs that need no new process (run/spanning_session.py).
Fixed = the trial's wall seconds less its timed window. Target: window / fresh <= 0.25.

--search BUDGET: `autotune search --hosts ... --budget BUDGET --json` with this checkout, and
with `--before DIR` (a checkout of the older code: `git archive main | tar -x -C DIR`) too, one
after the other; per search: configurations measured, how many runs were windows, and the
verified figure. --start-delay S makes each rank's start S seconds dearer on every host (a
sitecustomize on the launches' PYTHONPATH), for a cluster whose starts cost 20-60 s. Results,
with the machine: benchmarks/results/hosts_window_cost_{fixed,search}_<date>.json.
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

from autotune.config import Config
from benchmarks import RESULTS, out_folder_problem
from benchmarks.timed.machine import describe as describe_machine
from benchmarks.timed.window_cost import WINDOW_KNOBS, _stats

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = Config(nnodes=2, nproc=2, threads=1, binding="taskset")


def fixed_cost(cluster, rounds: int, seconds: float, results: str) -> dict:
    from autotune.commands.common import Workload
    from autotune.run.trial import run_trial
    from autotune.run.warm import WarmLaunches
    settings = Workload(seconds=seconds, results=results).settings(cluster=cluster,
                                                                  timeout_s=300.0)
    topology = cluster.topologies[0]
    fresh, window, by_knob = [], [], {}
    warm = WarmLaunches()
    try:
        run_trial(LAUNCH, topology, settings, warm=warm)     # the kept launch's own first window
        for r in range(rounds):
            for side in (("fresh", "window") if r % 2 == 0 else ("window", "fresh")):
                if side == "fresh":
                    out = run_trial(LAUNCH, topology, settings)
                    if out.ok:
                        fresh.append(out.seconds - (out.window_s or 0.0))
                    continue
                for knob in WINDOW_KNOBS:
                    out = run_trial(LAUNCH.with_(**knob), topology, settings, warm=warm)
                    if out.ok:
                        cost = out.seconds - (out.window_s or 0.0)
                        window.append(cost)
                        by_knob.setdefault(next(iter(knob)), []).append(cost)
            print(f"round {r + 1}/{rounds}: fresh {fresh[-1:]} s, windows "
                  f"{[round(v[-1], 2) for v in by_knob.values()]} (starts {warm.starts}, "
                  f"windows {warm.windows})", flush=True)
    finally:
        warm.close()
    if not fresh or not window:
        raise SystemExit("hosts_window_cost: error: no ok trial on one side: "
                         f"{len(fresh)} fresh, {len(window)} windows")
    fresh_s, window_s = _stats(fresh), _stats(window)
    return {"fresh_s": fresh_s, "window_s": window_s,
            "by_knob": {k: _stats(v) for k, v in by_knob.items()},
            "ratio": window_s["median"] / fresh_s["median"], "target": 0.25}


def search(version: str, root: str, argv: list[str], work: Path, slow: str | None) -> dict:
    """One search with the autotune under `root` (its ranks on the hosts import the same one:
    PYTHONPATH goes with the cluster), its ranks' starts made dearer by the folder `slow`;
    what it measured and verified."""
    results = work / f"res-{version.replace(' ', '-')}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (slow, root)))}
    cmd = [sys.executable, "-m", "autotune", "search", *argv, "--json", "--results", str(results)]
    t0 = time.time()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=str(work))
    (work / f"{version.replace(' ', '-')}.err").write_text(done.stderr)
    try:   # --json prints the summary as one indented object
        summary = json.loads(done.stdout)
    except ValueError:
        summary = {}
    account = _account(summary)
    return {"version": version, "rc": done.returncode, "seconds": round(time.time() - t0, 1),
            # the search's own count (its account), else the study's
            "configurations": account.get("configurations", _configurations(summary, results)),
            "recommendation": summary.get("recommendation"),
            # the budget never used, and why (issue 62; None from a version without the row)
            "unused_s": account.get("unused_s"), "unused_why": account.get("unused_why"),
            "windows": f"{account.get('warm_runs')} of {sum(account.get('runs', {}).values())} "
                       "runs" if account else None,
            # per kind: the trials, quality runs and verification rounds that were windows
            "windows_by_kind": {k: f"{account.get('warm', {}).get(k, 0)} of {n}"
                                for k, n in account.get("runs", {}).items() if n},
            "stderr_file": str(work / f"{version.replace(' ', '-')}.err")}


def _account(found) -> dict:
    """The search's account of its budget (the object with `warm_runs`), wherever the summary
    holds it ({} when none)."""
    if isinstance(found, dict):
        if "warm_runs" in found:
            return found
        found = list(found.values())
    for item in found if isinstance(found, list) else ():
        if (inner := _account(item)):
            return inner
    return {}


def _configurations(summary: dict, results: Path) -> int | None:
    """The distinct configurations in the search's study (ok or not, infeasible ones left out;
    one the sampler asked for again counted once, though it may differ in knobs its launch
    ignores: the search's account counts those as one)."""
    if not summary.get("study"):
        return None
    import optuna
    study = optuna.load_study(study_name=summary["study"],
                              storage=f"sqlite:///{results / 'autotune.db'}")
    return len({json.dumps(t.user_attrs["config"], sort_keys=True) for t in study.trials
                if t.user_attrs.get("config")
                and t.user_attrs.get("outcome") not in (None, "infeasible")})


# Put on the PYTHONPATH of a search (which its launches carry to every host): a rank's interpreter
# waits before it runs, as one whose torch comes from a slow shared file system does. Only the
# ranks' (the module it runs is autotune.worker, as sys.orig_argv shows before any module runs):
# not the binding shim that starts them (its argv names the worker after its own module: waiting
# there too made each start twice as dear), the runner, its probes or its kills.
SLOW_START = """import sys, time
argv = getattr(sys, "orig_argv", [])
if "-m" in argv and argv[argv.index("-m") + 1:][:1] == ["autotune.worker"]:
    time.sleep({delay_s!r})
"""


def slow_start(delay_s: float, work: Path) -> str:
    """A folder whose sitecustomize.py makes each rank's start `delay_s` seconds dearer."""
    folder = work / "slow-start"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(SLOW_START.format(delay_s=delay_s))
    return str(folder)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", default="th1:1,th2:1")
    p.add_argument("--ssh-config")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=2.0, help="each timed window")
    p.add_argument("--search", metavar="BUDGET", help="run the search over the hosts instead")
    p.add_argument("--before", help="with --search: a checkout of the older code (its root)")
    p.add_argument("--start-delay", type=float, default=0.0, metavar="S",
                   help="with --search: each rank's interpreter waits S seconds before it runs, "
                        "on every host, as a start on a real cluster costs 20-60 s")
    p.add_argument("--out", default=str(RESULTS), help="folder for the JSON (benchmarks/results)")
    args = p.parse_args(argv)
    if (why := out_folder_problem(args.out)) is not None:
        print(f"hosts_window_cost: error: {why}", file=sys.stderr)
        return 2
    if args.rounds < 1:
        print("hosts_window_cost: error: --rounds must be at least 1", file=sys.stderr)
        return 2
    if args.before and not (Path(args.before) / "autotune").is_dir():
        print(f"hosts_window_cost: error: --before {args.before}: no autotune/ in it",
              file=sys.stderr)
        return 2
    if args.start_delay < 0 or (args.start_delay and not args.search):
        print("hosts_window_cost: error: --start-delay is seconds >= 0, with --search",
              file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="hosts-window-cost-"))
    out: dict = {"machine": describe_machine(fingerprint=True), "hosts": args.hosts,
                 "command": "python3 -m benchmarks.timed.hosts_window_cost "
                            + " ".join(argv if argv is not None else sys.argv[1:])}
    t0 = time.time()
    if args.search:
        common = ["--hosts", args.hosts, "--budget", args.search,
                  *(["--ssh-config", args.ssh_config] if args.ssh_config else [])]
        versions = {"this checkout": str(ROOT)}
        if args.before:
            versions["before"] = str(Path(args.before).resolve())
        out["searches"] = []
        slow = slow_start(args.start_delay, work) if args.start_delay else None
        out["start_delay_s"] = args.start_delay
        for version, root in versions.items():
            out["searches"].append(search(version, root, common, work, slow))
            print(json.dumps(out["searches"][-1]), flush=True)
    else:
        from autotune.commands.hosts import Hosts, probe_hosts
        cluster = probe_hosts(Hosts(hosts=args.hosts, ssh_config=args.ssh_config),
                              say=print, results=str(work / "res"))
        out["fixed_cost"] = fixed_cost(cluster, args.rounds, args.seconds, str(work / "res"))
    out["seconds"] = round(time.time() - t0, 1)
    kind = "search" if args.search else "fixed"   # one file each: neither run overwrites the other
    path = Path(args.out) / f"hosts_window_cost_{kind}_{time.strftime('%Y-%m-%d')}.json"
    n = 1
    while path.exists():   # a second run of the day is kept beside the first
        n += 1
        path = path.with_name(f"hosts_window_cost_{kind}_{time.strftime('%Y-%m-%d')}_{n}.json")
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "machine"}, indent=1))
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
