"""SLURM for real: a slurmctld here and a slurmd in each of two namespace hosts
(tests/slurm_cluster.py). A search inside an allocation, started the way docs/clusters.md says
(`srun -N2 --ntasks-per-node=1 autotune search` in an sbatch script, and `salloc` from the
submitting host), runs once, sends every trial through `srun --overlap` and measures a trial on
both nodes; the sbatch script `autotune export --format slurm` writes runs under a real sbatch."""
from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path

import optuna
import psutil
import pytest

from autotune.cli import main
from slurm_cluster import NAMESPACES, NET, Slurm, slurm_cluster
from tiny_space import one_rank_per_host

pytestmark = pytest.mark.slow
DONE = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
        "BOOT_FAIL", "DEADLINE", "PREEMPTED")
SPACE = one_rank_per_host("tiny-slurm")   # the search chooses only nnodes


def autotune() -> str:
    """The command a user types: the venv's `autotune` (python -m autotune without one)."""
    exe = Path(sys.executable).parent / "autotune"
    return str(exe) if exe.exists() else f"{shlex.quote(sys.executable)} -m autotune"


def submit(slurm: Slurm, script: Path, folder: Path, timeout: float = 400) -> dict[str, str]:
    """sbatch the script and wait for its end, polled every 0.3 s (`sbatch --wait` took 42 s
    here for a job of 14 s); the job's fields as `scontrol show job` gives them."""
    sub = slurm.run("sbatch", "--parsable", "-D", str(folder), "-o", f"{script}.out",
                    "-e", f"{script}.err", str(script))
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip().split(";")[0]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = slurm.run("scontrol", "show", "job", "-o", job).stdout
        fields = dict(kv.split("=", 1) for kv in text.split() if "=" in kv)
        if fields.get("JobState") in DONE:
            return fields
        time.sleep(0.3)
    slurm.run("scancel", job)
    raise AssertionError(f"job {job} did not end within {timeout:.0f}s: "
                         f"{Path(f'{script}.err').read_text()[-2000:]}")


def leftovers(wait_s: float = 15.0) -> dict[str, list[str]]:
    """Processes in each namespace node other than its daemons, after up to `wait_s`."""
    import subprocess
    deadline = time.monotonic() + wait_s
    while True:
        found = {}
        for ns in NAMESPACES:
            names = []
            for pid in subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                                      text=True).stdout.split():
                try:
                    p = psutil.Process(int(pid))
                    if p.name() not in ("sshd", "slurmd") and p.status() != psutil.STATUS_ZOMBIE:
                        names.append(f"{pid} {' '.join(p.cmdline())[:120]}")
                except psutil.Error:
                    pass
            found[ns] = names
        if not any(found.values()) or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


@pytest.fixture(scope="module")
def slurm():
    with slurm_cluster(2) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def searched(slurm, tmp_path_factory):
    """The README's way inside an allocation: an sbatch script whose srun starts the search on
    each of its 2 nodes (one task per node); task 0 searches, task 1 only says so."""
    d = tmp_path_factory.mktemp("slurm-search")
    (d / "space.yaml").write_text(SPACE)
    script = d / "search.sbatch"
    script.write_text("\n".join([
        "#!/bin/bash", "#SBATCH --nodes=2", "#SBATCH --exclusive",
        f"srun -N2 --ntasks-per-node=1 {autotune()} search --space space.yaml --budget 6m "
        "--seconds 1 --verify-rounds 1 --max-verify-rounds 1 --workload mlp "
        f"--quality-samples 2048 --quality-seeds 2 --json --results {d / 'res'}", ""]))
    started = time.monotonic()
    job = submit(slurm, script, d, timeout=500)   # the budget caps it; 2-4 min here
    return d, job, time.monotonic() - started


@pytest.mark.scenario
def test_search_in_an_allocation_runs_once_with_every_trial_through_srun(slurm, searched):
    d, job, took = searched
    err = Path(f"{d / 'search.sbatch'}.err").read_text()
    assert job["JobState"] == "COMPLETED" and job["ExitCode"] == "0:0", (job, err[-3000:])
    print(f"search job: {took:.0f}s from sbatch to its end")
    waived = [x for x in err.splitlines() if "task 0 runs the search" in x]
    assert waived == ["autotune: SLURM task 1 of 2: task 0 runs the search (one per allocation, "
                      "its trials started on every node by srun); this task exits"], err[-3000:]
    assert err.count("autotune search: study") == 1
    assert "probing sl1 (srun)" in err and "probing sl2 (srun)" in err
    summary = json.loads(Path(f"{d / 'search.sbatch'}.out").read_text())
    assert summary["recommendation"] is not None, summary
    study = optuna.load_study(study_name=summary["study"], storage=summary["storage"])
    cluster = study.user_attrs["cluster"]
    # Slots are the CPUs the allocation gives each node (SLURM_JOB_CPUS_PER_NODE, here
    # `2(x2)` on 2 cores), not the step's one task per node.
    assert cluster["launcher"] == "srun" and cluster["addresses"] == [f"{NET}.11", f"{NET}.12"]
    assert [h["slots"] for h in cluster["hosts"]] == [slurm.cpus] * 2
    folders = sorted((d / "res" / "trials").iterdir())
    assert folders and all((f / "launcher-srun.log").exists() for f in folders)
    spanning = [t for t in study.trials if t.user_attrs.get("config", {}).get("nnodes") == 2
                and t.user_attrs.get("outcome") == "ok"]
    assert spanning, "no trial spanned both nodes"
    two = [f for f in folders if (f / "rank1.json").exists()]
    ranks = [json.loads((f / f"rank{r}.json").read_text()) for f in two[:1] for r in (0, 1)]
    # each rank in its own node: sl1's slurmd runs on CPU 0, sl2's on CPU 1
    assert [r["world_size"] for r in ranks] == [2, 2]
    assert sorted(tuple(r["in_force"]["affinity"]) for r in ranks) == [(0,), (1,)] or \
        os.cpu_count() != 2
    assert leftovers() == {ns: [] for ns in NAMESPACES}


@pytest.mark.scenario
def test_exported_sbatch_script_runs_to_completion_under_sbatch(slurm, searched, capsys):
    """The export of the trial measured on both nodes: its own 2-node job, a real sbatch."""
    d, _job, _took = searched
    summary = json.loads(Path(f"{d / 'search.sbatch'}.out").read_text())
    study = optuna.load_study(study_name=summary["study"], storage=summary["storage"])
    spanning = next(t.number for t in study.trials if t.user_attrs.get("outcome") == "ok"
                    and t.user_attrs.get("config", {}).get("nnodes") == 2)
    assert main(["export", "--results", str(d / "res"), "--format", "slurm", "--seconds", "1",
                 "--trial", str(spanning)]) == 0
    script = d / "two-nodes.sbatch"
    script.write_text(capsys.readouterr().out)
    job = submit(slurm, script, d, timeout=180)
    out = Path(f"{script}.out").read_text()
    err = Path(f"{script}.err").read_text()
    assert job["JobState"] == "COMPLETED" and job["ExitCode"] == "0:0", (job, err[-2000:])
    assert job["NumNodes"] == "2" and job["NodeList"] == "sl[1-2]", job
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    assert len(lines) == 2 and all(x["status"] == "ok" and x["world_size"] == 2
                                   for x in lines), out[-2000:]
    assert leftovers() == {ns: [] for ns in NAMESPACES}


def test_salloc_from_the_submitting_host_and_a_node_outside_it(slurm, tmp_path):
    """`salloc -N2 autotune ...` runs the command here, outside the nodes: the trial is still
    one srun step on both; a --hosts node the allocation lacks is one line, exit 2."""
    base = ["salloc", "--quiet", "-N2", "--exclusive", *shlex.split(autotune())]
    run = slurm.run(*base, "run", "--json", "--set", "nnodes=2", "--set", "nproc=2",
                    "--set", "threads=1", "--set", "binding=taskset", "--seconds", "1",
                    "--results", str(tmp_path / "res"), timeout=240)
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert run.returncode == 0 and out["outcome"] == "ok", run.stderr[-2000:]
    (trial,) = (tmp_path / "res" / "trials").iterdir()
    assert (trial / "launcher-srun.log").exists() and (trial / "rank1.json").exists()
    bad = slurm.run(*base, "search", "--hosts", "sl1,sl9", "--budget", "1m",
                    "--results", str(tmp_path / "bad"), timeout=120)
    lines = bad.stderr.strip().splitlines()
    assert bad.returncode == 2 and len(lines) == 1, bad.stderr
    assert lines[0] == ("autotune: error: --hosts: sl9 is not a node of this SLURM allocation "
                        "(sl1, sl2); name its nodes, or --launcher ssh for other hosts")
    assert not (tmp_path / "bad").exists()
    assert leftovers() == {ns: [] for ns in NAMESPACES}


@pytest.mark.scenario
def test_a_hung_trial_through_srun_leaves_no_process_on_either_node(slurm, tmp_path):
    """Past its timeout the trial's srun is stopped (SLURM cancels the step on every node) and
    the kill by marker runs on each node as an srun --overlap step of its own."""
    hang = f"{shlex.quote(sys.executable)} -c 'import time; time.sleep(600)'"
    run = slurm.run("salloc", "--quiet", "-N2", "--exclusive", *shlex.split(autotune()), "run",
                    "--json", "--set", "nnodes=2", "--set", "nproc=2", "--timeout", "10",
                    "--results", str(tmp_path), "--", *shlex.split(hang), timeout=240)
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert run.returncode == 1 and out["outcome"] == "timeout", run.stderr[-2000:]
    assert leftovers() == {ns: [] for ns in NAMESPACES}
    assert slurm.run("squeue", "-h").stdout.strip() == ""


KEPT_RUNNER = """
import json, subprocess, sys
import psutil
from autotune.commands.common import Workload
from autotune.commands.hosts import Hosts, probe_hosts
from autotune.config import Config
from autotune.run.trial import run_trial
from autotune.run.warm import WarmLaunches

def workers():
    out = {}
    for ns in sys.argv[2:]:
        found = []
        for pid in subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                                  text=True).stdout.split():
            try:
                argv = psutil.Process(int(pid)).cmdline()
            except psutil.Error:
                continue
            if "autotune.worker" in argv and "autotune.bind" not in argv:
                found.append(int(pid))
        out[ns] = sorted(found)
    return out

cluster = probe_hosts(Hosts(), say=print, results=sys.argv[1])
settings = Workload(seconds=1, results=sys.argv[1]).settings(cluster=cluster, timeout_s=120.0)
config = Config(nnodes=2, nproc=2, threads=1, binding="taskset")
warm, seen = WarmLaunches(), {"launcher": cluster.launcher, "refused": cluster.kept_refusal}
try:
    for name, c in (("start", config), ("window", config.with_(global_batch=64)),
                    ("launch knob", config.with_(binding="none"))):
        out = run_trial(c, cluster.topologies[0], settings, warm=warm)
        seen[name] = {"outcome": out.outcome, "reason": out.reason, "workers": workers(),
                      "starts": warm.starts, "windows": warm.windows}
finally:
    seen["owed"] = warm.close()
print(json.dumps(seen))
"""


# A scenario (~25 s): the kept launch is the ssh test's code in CI (test_kept_multihost.py), and a
# trial through salloc and srun stays in CI (test_salloc_from_the_submitting_host_...).
@pytest.mark.scenario
def test_a_window_knob_through_srun_is_served_by_the_same_ranks_on_both_nodes(slurm, tmp_path):
    """In a real `salloc -N2`: a kept launch's srun step serves the window knob with the ranks
    already running on both nodes (the same pids), and a launch knob starts a new step."""
    run = slurm.run("salloc", "--quiet", "-N2", "--exclusive", sys.executable, "-c",
                    KEPT_RUNNER, str(tmp_path / "res"), *NAMESPACES, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["launcher"] == "srun" and seen["refused"] == "", seen
    start, window, knob = seen["start"], seen["window"], seen["launch knob"]
    assert [x["outcome"] for x in (start, window, knob)] == ["ok"] * 3, seen
    assert all(len(start["workers"][ns]) == 1 for ns in NAMESPACES), seen
    assert window["workers"] == start["workers"] and (window["starts"], window["windows"]) \
        == (1, 1), seen
    assert knob["starts"] == 2 and all(
        len(knob["workers"][ns]) == 2 and set(start["workers"][ns]) < set(knob["workers"][ns])
        for ns in NAMESPACES), seen
    assert seen["owed"] == []
    assert leftovers() == {ns: [] for ns in NAMESPACES}
    assert slurm.run("squeue", "-h").stdout.strip() == ""
