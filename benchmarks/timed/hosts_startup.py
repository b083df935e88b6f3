"""What a trial across hosts costs before it measures anything: one host against two, interleaved.

    scripts/testhosts.sh up 2                               # two namespace hosts (root)
    git archive <older commit> | tar -x -C /tmp/before      # optional: the code to compare with
    python3 -m benchmarks.timed.hosts_startup --ssh-config /tmp/autotune-testhosts/ssh_config \\
        --hosts th1:1,th2:1 --rounds 4 --before /tmp/before

Each round runs, for each code version (this checkout, and `--before DIR` when given) and for 1
and 2 hosts, one real trial of the same launch (1 rank per host, 1 thread, taskset, gloo, the
built-in CNN) through `run_trial`, each in a fresh process that imports that version's autotune
(the ranks on the hosts import the same one: PYTHONPATH goes with the cluster). The order inside
a round alternates, so drift on a shared machine falls on both sides. Per trial:

  first timed step   from the call of run_trial (port lookup and plan included) to rank 0's
                     first timed step: the fixed cost a trial pays before it measures
  first step         the same to the slowest rank's first training step (start-up only)
  wall               the whole trial as the search pays it, teardown on every host included

Printed: medians per version and host count, and per-round ratios (2 hosts / 1 host; this
checkout / before) with their median. Written to benchmarks/results/hosts_startup_<date>.json.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]     # run by path too (--one, another checkout's PYTHONPATH): only stdlib here
RESULTS = ROOT / "benchmarks" / "results"


def one_trial(cluster_json: str, nnodes: int, seconds: float, results: str) -> dict[str, Any]:
    """Run one trial with whichever autotune this process imports; the fields the table needs."""
    import autotune
    from autotune.config import Config
    from autotune.plan.cluster import cluster_from_json
    from autotune.run.trial import TrialSettings, run_trial
    cluster = cluster_from_json(json.loads(Path(cluster_json).read_text()))
    env = {**cluster.env, **({"PYTHONPATH": os.environ["PYTHONPATH"]}
                             if os.environ.get("PYTHONPATH") else {})}
    cluster = dataclasses.replace(cluster, env=env)
    try:   # a version with shared ssh connections uses them, as its search would
        from autotune.run.remote import ssh_control_dir
        cluster = dataclasses.replace(cluster, control_dir=ssh_control_dir())
    except ImportError:
        pass
    settings = TrialSettings(target_seconds=seconds, timeout_s=180.0, results_dir=results,
                             cluster=cluster)
    config = Config(nnodes=nnodes, nproc=nnodes, threads=1, binding="taskset")
    trial_id = f"bench-{uuid.uuid4().hex[:8]}"
    t0 = time.time()
    out = run_trial(config, cluster.topologies[0], settings, trial_id=trial_id)
    wall = time.time() - t0
    ranks = [json.loads(p.read_text()) for p in
             sorted(Path(results, "trials", trial_id).glob("rank[0-9]*.json"))]
    firsts = [r.get("first_step_at") for r in ranks]
    timed = ranks[0].get("timed_start_at") if ranks else None
    return {"autotune": str(Path(autotune.__file__).parent.parent), "nnodes": nnodes,
            "outcome": out.outcome, "throughput": out.throughput, "wall_s": round(wall, 2),
            "first_step_s": round(max(firsts) - t0, 2) if firsts and all(firsts) else None,
            "first_timed_s": round(timed - t0, 2) if timed else None,
            "cpu_share": out.cpu_share}


def _child(version: str, root: str, cluster_json: str, nnodes: int, seconds: float,
           results: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": root}   # that version's autotune, here and on the hosts
    argv = [sys.executable, str(Path(__file__)), "--one", "--cluster-json", cluster_json,
            "--nnodes", str(nnodes), "--seconds", str(seconds), "--results", results]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"version": version, "nnodes": nnodes, "outcome": "benchmark error",
                "error": done.stderr[-800:]}
    return {"version": version, **json.loads(lines[-1])}


def _ratios(rows: list[dict[str, Any]], key: str, num: tuple[str, int],
            den: tuple[str, int]) -> list[float]:
    """Per round: the row (version, nnodes) `num` over the row `den`, where both are ok."""
    out = []
    for r in sorted({row["round"] for row in rows}):
        pick = {(x["version"], x["nnodes"]): x for x in rows if x["round"] == r}
        a, b = pick.get(num), pick.get(den)
        if a and b and a.get(key) and b.get(key):
            out.append(round(a[key] / b[key], 3))
    return out


def summarize(rows: list[dict[str, Any]], versions: list[str]) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for v in versions:
        for nn in (1, 2):
            ok = [x for x in rows if x["version"] == v and x["nnodes"] == nn
                  and x["outcome"] == "ok"]
            table[f"{v} {nn} host(s)"] = {
                k: statistics.median(x[k] for x in ok) if ok else None
                for k in ("first_timed_s", "first_step_s", "wall_s")} | {"ok": len(ok)}
    ratios: dict[str, Any] = {}
    for key in ("first_timed_s", "wall_s"):
        for v in versions:
            rs = _ratios(rows, key, (v, 2), (v, 1))
            ratios[f"{key}: {v}, 2 hosts / 1 host"] = {"per_round": rs, "median":
                                                       statistics.median(rs) if rs else None}
        if len(versions) == 2:
            for nn in (1, 2):
                rs = _ratios(rows, key, (versions[0], nn), (versions[1], nn))
                ratios[f"{key}: {versions[0]} / {versions[1]}, {nn} host(s)"] = {
                    "per_round": rs, "median": statistics.median(rs) if rs else None}
    return {"medians": table, "ratios": ratios}


def probe_once(hosts: str, ssh_config: str | None, path: Path) -> None:
    from autotune.plan.cluster import cluster_to_json
    from autotune.plan.hosts import parse_hosts
    from autotune.run.remote import probe_cluster
    cluster = probe_cluster(parse_hosts(hosts), ssh_config=ssh_config, cwd=str(path.parent))
    path.write_text(json.dumps(cluster_to_json(cluster)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", default="th1:1,th2:1")
    p.add_argument("--ssh-config")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--seconds", type=float, default=2.0, help="timed window of each trial")
    p.add_argument("--before", help="a checkout of the code to compare with (its root)")
    p.add_argument("--label", default="", help="a note for the results file (machine state)")
    p.add_argument("--out", help="results file (default: benchmarks/results/hosts_startup_<date>.json)")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--cluster-json", help=argparse.SUPPRESS)
    p.add_argument("--nnodes", type=int, help=argparse.SUPPRESS)
    p.add_argument("--results", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(one_trial(args.cluster_json, args.nnodes, args.seconds, args.results)))
        return 0
    return run_rounds(args)


def run_rounds(args: argparse.Namespace) -> int:
    import tempfile
    from benchmarks.timed.machine import describe
    work = Path(tempfile.mkdtemp(prefix="hosts-startup-"))
    cluster_json = work / "cluster.json"
    probe_once(args.hosts, args.ssh_config, cluster_json)
    versions = {"this checkout": str(ROOT)}
    if args.before:
        versions["before"] = str(Path(args.before).resolve())
    rows = []
    for r in range(args.rounds):
        runs = [(v, nn) for v in versions for nn in (1, 2)]
        for v, nn in (runs if r % 2 == 0 else runs[::-1]):   # A B B A: drift falls on both
            row = {"round": r, **_child(v, versions[v], str(cluster_json), nn, args.seconds,
                                        str(work / "res"))}
            rows.append(row)
            print(f"round {r + 1}/{args.rounds} {v}, {nn} host(s): {row.get('outcome')} "
                  f"first timed step {row.get('first_timed_s')} s, wall {row.get('wall_s')} s",
                  flush=True)
    out = {"machine": describe(), "label": args.label, "hosts": args.hosts,
           "seconds": args.seconds, "rounds": args.rounds,
           "command": "python3 -m benchmarks.timed.hosts_startup " + " ".join(sys.argv[1:]),
           **summarize(rows, list(versions)), "rows": rows}
    path = Path(args.out) if args.out else RESULTS / f"hosts_startup_{time.strftime('%Y-%m-%d')}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({"medians": out["medians"], "ratios": out["ratios"]}, indent=1))
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
