"""Real trials across two "hosts": network namespaces with their own address, sshd and CPUs
(scripts/testhosts.sh). Every launch goes through a real launcher (ssh + torchrun, Open MPI's
mpirun); afterwards no process of a trial may be left in either namespace."""
from __future__ import annotations

from paths import REPO
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from autotune.cli import main

pytestmark = pytest.mark.slow
ROOT = REPO
SCRIPT = ROOT / "scripts" / "testhosts.sh"
# The set of test hosts (AUTOTUNE_TESTHOSTS_SET, scripts/testhosts.sh): another set on the same
# machine is never touched. Its namespaces and addresses are read from the hosts file `up` writes.
NAMESPACES: tuple[str, ...] = ("atth1", "atth2")
ADDRESSES: tuple[str, ...] = ("10.231.77.11", "10.231.77.12")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    """Two namespace hosts th1, th2 (one CPU each here); yields the ssh config to reach them."""
    global NAMESPACES, ADDRESSES
    if os.geteuid() != 0:
        pytest.skip("namespace test hosts need root (ip netns, veth, sshd)")
    d = tmp_path_factory.mktemp("testhosts") / "h"
    env = {**os.environ, "AUTOTUNE_TESTHOSTS_DIR": str(d)}
    up = subprocess.run([str(SCRIPT), "up", "2"], env=env, capture_output=True, text=True,
                        timeout=180)
    assert up.returncode == 0, up.stderr
    rows = [line.split() for line in (d / "hosts").read_text().splitlines()]
    NAMESPACES = tuple(r[r.index("netns") + 1] for r in rows)
    ADDRESSES = tuple(r[1] for r in rows)
    try:
        yield str(d / "ssh_config")
    finally:
        subprocess.run([str(SCRIPT), "down"], env=env, capture_output=True, timeout=120)


def leftovers(wait_s: float = 10.0) -> dict[str, list[str]]:
    """Processes other than sshd in each namespace host, after waiting up to `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        found = {}
        for ns in NAMESPACES:
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                                  text=True).stdout.split()
            names = []
            for pid in pids:
                try:
                    p = psutil.Process(int(pid))
                    if p.name() != "sshd" and p.status() != psutil.STATUS_ZOMBIE:
                        names.append(f"{pid} {' '.join(p.cmdline())[:120]}")
                except psutil.Error:
                    pass
            found[ns] = names
        if not any(found.values()) or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def run_json(capsys, *argv: str) -> tuple[int, dict]:
    rc = main(["run", "--json", *argv])
    out = [x for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    return rc, json.loads(out[-1])


# ssh's twin is a scenario (CI time): every other two-host test here launches through ssh
@pytest.mark.parametrize("launcher", [pytest.param("ssh", marks=pytest.mark.scenario), "mpirun"])
def test_two_host_gloo_trial_by_each_launcher(hosts, launcher, tmp_path, capsys):
    rc, out = run_json(capsys, "--hosts", "th1:1,th2:1", "--ssh-config", hosts,
                       "--launcher", launcher, "--set", "nnodes=2", "--set", "nproc=2",
                       "--set", "threads=1", "--set", "binding=taskset", "--seconds", "2",
                       "--results", str(tmp_path))
    assert rc == 0 and out["outcome"] == "ok", out
    assert out["measurement"]["throughput"] > 0
    ranks = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("trials/*/rank[01].json"))]
    # Each rank ran in its own host, bound to that host's CPU (th1 has CPU 0, th2 CPU 1 here).
    assert [r["world_size"] for r in ranks] == [2, 2]
    assert sorted(tuple(r["in_force"]["affinity"]) for r in ranks) == [(0,), (1,)] or \
        os.cpu_count() != 2
    assert leftovers() == {ns: [] for ns in NAMESPACES}


@pytest.mark.scenario
def test_two_host_ccl_trial_uses_the_hosts_interface(hosts, tmp_path, capsys):
    """oneCCL across the namespace hosts: its key-value service and libfabric listen on the
    interface that reaches the other host (eth0 there), and each rank ran over ccl."""
    from autotune.comm import ccl
    if ccl.problem():
        pytest.skip(f"ccl unavailable here: {ccl.problem()}")
    args = ("--hosts", "th1:1,th2:1", "--ssh-config", hosts, "--set", "nnodes=2", "--set",
            "nproc=2", "--set", "threads=1", "--set", "binding=taskset", "--set", "backend=ccl")
    assert main(["run", *args, "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    envs = [r["env"] for r in plan["ranks"]]
    assert {e["CCL_KVS_IFACE"] for e in envs} == {"eth0"} == {e["FI_TCP_IFACE"] for e in envs}
    rc, out = run_json(capsys, *args, "--seconds", "2", "--results", str(tmp_path))
    assert rc == 0 and out["outcome"] == "ok", out
    ranks = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("trials/*/rank[01].json"))]
    assert [r["in_force"]["backend"] for r in ranks] == ["ccl", "ccl"]
    assert leftovers() == {ns: [] for ns in NAMESPACES}


def test_a_trial_across_hosts_behind_the_leader_ends_early_on_both_hosts(hosts, tmp_path):
    """Early stopping across hosts: the leader the search races reaches the ranks through the
    trial's request, rank 0 (on th1) judges its windows, and the rank on th2 stops after the same
    step (a rank that went on would wait for ever in its next all-reduce)."""
    from autotune.commands.common import Workload
    from autotune.commands.hosts import Hosts, probe_hosts
    from autotune.config import Config
    from autotune.run.trial import run_trial
    cluster = probe_hosts(Hosts(hosts="th1:1,th2:1", ssh_config=hosts), say=print)
    settings = Workload(seconds=3, results=str(tmp_path)).settings(
        cluster=cluster, timeout_s=120.0, leader_throughput=1e9)
    config = Config(nnodes=2, nproc=2, threads=1, binding="taskset")
    out = run_trial(config, cluster.topologies[0], settings)
    assert out.ok and out.throughput, out
    assert out.stopped_early and out.stopped_early.startswith("stopped early after 2 windows")
    ranks = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("trials/*/rank[01].json"))]
    assert len(ranks) == 2 and ranks[0]["timed_steps"] == ranks[1]["timed_steps"]
    assert ranks[0]["window_seconds"] < 0.6 * 3
    assert leftovers() == {ns: [] for ns in NAMESPACES}


@pytest.mark.parametrize("launcher", ["ssh", "mpirun"])
@pytest.mark.scenario
def test_hung_trial_leaves_no_process_on_any_host(hosts, launcher, tmp_path, capsys):
    rc, out = run_json(capsys, "--hosts", "th1,th2", "--ssh-config", hosts,
                       "--launcher", launcher, "--set", "nnodes=2", "--set", "nproc=2",
                       "--timeout", "20", "--results", str(tmp_path), "--",
                       sys.executable, "-c", "import time; time.sleep(600)")
    assert rc == 1 and out["outcome"] == "timeout", out
    assert leftovers() == {ns: [] for ns in NAMESPACES}


def test_a_rank_crashing_on_one_host_stops_the_other_host(hosts, tmp_path, capsys):
    crash = ("import os, sys, time\n"
             "if os.environ['AUTOTUNE_PLAN_INDEX'] == '1': sys.exit('rank 1 gives up')\n"
             "time.sleep(600)")
    rc, out = run_json(capsys, "--hosts", "th1,th2", "--ssh-config", hosts,
                       "--set", "nnodes=2", "--set", "nproc=2", "--timeout", "90",
                       "--results", str(tmp_path), "--", sys.executable, "-c", crash)
    assert rc == 1 and out["outcome"] == "crash", out
    assert "rank 1 gives up" in out["log_tail"]
    assert leftovers() == {ns: [] for ns in NAMESPACES}


def test_unreachable_host_and_refused_ssh_are_one_line_errors(hosts, tmp_path, capsys):
    net = ADDRESSES[1].rsplit(".", 1)[0]
    cfg = Path(hosts).read_text().replace("th2", "thdown").replace(ADDRESSES[1], f"{net}.99")
    down = tmp_path / "ssh_config"
    down.write_text(cfg + f"\nHost threfused\n  HostName {net}.1\n  Port 1\n  BatchMode yes\n")
    for host, needle in (("threfused", "ssh refused the connection"),
                         ("thdown", "host unreachable")):
        rc = main(["run", "--hosts", f"th1,{host}", "--ssh-config", str(down), "--set", "nnodes=2",
                   "--set", "nproc=2", "--results", str(tmp_path)])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and needle in err[-1] and err[-1].startswith("autotune: error:"), err


def test_rendezvous_port_in_use_on_the_first_host_is_one_line(hosts, tmp_path, capsys):
    port = 29777
    code = (f"import socket,time; s=socket.socket(); s.bind(('',{port})); s.listen(); "
            "print('bound', flush=True); time.sleep(60)")
    holder = subprocess.Popen(["ssh", "-F", hosts, "th1", "--", "timeout", "40", "python3", "-c",
                               shlex.quote(code)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "bound"
        rc = main(["run", "--hosts", "th1,th2", "--ssh-config", hosts, "--master-port", str(port),
                   "--set", "nnodes=2", "--set", "nproc=2", "--results", str(tmp_path)])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and err[-1] == (f"autotune: error: port {port} is in use on th1; "
                                       "pick another --master-port"), err
    finally:
        holder.kill()
        holder.wait()
        # the ssh client's end does not end the holder on th1 (its `timeout 40` would): a test
        # after this one checks the hosts hold nothing of ours
        subprocess.run(["ssh", "-F", hosts, "th1", "--", "pkill", "-f", f"'s.bind.*{port}'"],
                       capture_output=True, timeout=30)


@pytest.mark.scenario
def test_a_short_search_over_two_hosts_measures_a_spanning_launch_and_its_exports_run(
        hosts, tmp_path, monkeypatch, capsys):
    """The built-in space, as a user runs it: the guide's first guess spans both hosts (issue 35:
    an 8-minute search started from one host and never measured two), the budget note names a
    trial across the hosts, and the noise floor's seeds of the one-host default launch run side
    by side, one host each. Then the exported commands, the recommendation's and the spanning
    trial's through torchrun and mpirun, run as a user pastes them (one search for both halves:
    a search across hosts costs minutes here)."""
    monkeypatch.chdir(tmp_path)    # exported commands run their ranks in the search's directory
    rc = main(["search", "--hosts", "th1:1,th2:1", "--ssh-config", hosts, "--budget", "5m",
               "--seconds", "1", "--max-trials", "4", "--verify-rounds", "1",
               "--max-verify-rounds", "1", "--quality-samples", "1024", "--quality-seeds", "2",
               "--json", "--results", str(tmp_path / "res")])
    captured = capsys.readouterr()
    assert rc == 0, captured.err[-3000:]
    summary = json.loads(captured.out)
    import optuna
    study = optuna.load_study(study_name=summary["study"],
                              storage=f"sqlite:///{tmp_path / 'res' / 'autotune.db'}")
    measured = [t.user_attrs for t in sorted(study.trials, key=lambda t: t.number)
                if t.user_attrs.get("config") and t.user_attrs.get("outcome") != "infeasible"]
    roles = [(a["role"], a["config"].get("nnodes", 1), a["outcome"]) for a in measured]
    assert roles[:2] == [("reference:default", 1, "ok"), ("reference:run_cpu", 1, "ok")], roles
    # then the default launch compiled where compiling is offered (issue 59), then the guess
    guess = next(r for r in roles if r[0] == "search")
    assert guess == ("search", 2, "ok"), roles
    assert roles[2] in (("reference:default_compiled", 1, "ok"), guess), roles
    budget = [line for line in captured.err.splitlines() if "budget:" in line]
    assert budget and "across 2 hosts" in budget[0], captured.err[-3000:]
    beside = [line for line in captured.err.splitlines() if "side by side" in line]
    assert len(beside) == 2 and "seed 0" in beside[0] and "seed 1" in beside[1], \
        captured.err[-3000:]
    assert summary["recommendation"] is not None and "verified" in summary["recommendation"]
    assert leftovers() == {ns: [] for ns in NAMESPACES}
    spanning = _spanning(study)
    for fmt, trial in (("torchrun", None), ("mpirun", spanning), ("torchrun", spanning)):
        argv = ["export", "--results", str(tmp_path / "res"), "--format", fmt, "--seconds", "1"]
        assert main(argv + (["--trial", str(trial)] if trial is not None else [])) == 0
        text = capsys.readouterr().out
        run = subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=240)
        lines = [json.loads(x) for x in run.stdout.splitlines() if x.startswith("{")]
        assert run.returncode == 0 and lines and all(x["status"] == "ok" for x in lines), \
            (fmt, run.stdout[-2000:], run.stderr[-2000:])
    assert leftovers() == {ns: [] for ns in NAMESPACES}


def _spanning(study) -> int:
    """The number of the first trial that ran on both hosts."""
    return next(t.number for t in sorted(study.trials, key=lambda t: t.number)
                if t.user_attrs.get("config", {}).get("nnodes") == 2
                and t.user_attrs.get("outcome") == "ok")


def test_a_scripts_report_across_hosts_is_read_from_a_results_folder_holding_a_semicolon(
        hosts, tmp_path, capsys):
    """Issue 61: across hosts a script's autotune.report_metrics() was never read (the plan
    dropped AUTOTUNE_REPORT from its ranks), and a ';' in --results split the trial's paths in
    the shim. A real script on th1 and th2 reports; rank 0's report is the score."""
    script = tmp_path / "reporting.py"
    script.write_text("import os, autotune\n"
                      "assert os.environ['WORLD_SIZE'] == '2'\n"
                      "autotune.report_metrics(samples_per_sec=100.0 + int(os.environ['RANK']),"
                      " accuracy=0.9)\n")
    results = tmp_path / "a;b"
    rc, out = run_json(capsys, "--hosts", "th1:1,th2:1", "--ssh-config", hosts,
                       "--set", "nnodes=2", "--set", "nproc=2", "--timeout", "90",
                       "--results", str(results), "--", sys.executable, str(script))
    assert rc == 0 and out["outcome"] == "ok", out
    assert out["metric_source"] == "report" and out["accuracy"] == 0.9, out
    assert out["measurement"]["throughput"] == 100.0
    reports = sorted(results.glob("trials/*/rank[01].report.json"))
    assert [json.loads(p.read_text())["samples_per_sec"] for p in reports] == [100.0, 101.0]
    assert leftovers() == {ns: [] for ns in NAMESPACES}
