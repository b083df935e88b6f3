"""`autotune launch`: the tuned configuration planned exactly as the export plans it, refusals
(other hardware, other torch, unverified, foreign manifest) as one line and exit 2, torchrun's
flags as overrides, and real launches: prefixed output, logs, the worst exit code, Ctrl-C."""
from __future__ import annotations

from paths import REPO
import dataclasses
import json
import re
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from autotune.util.child_python import python_module
from autotune.cli import main
from autotune.export.recommendation import save_recommendation
from autotune.config import Config
from autotune.export.command import launch_command
from autotune.export.launch import (Nodes, TunedConfig, exit_code, from_manifest, override,
                                    plan_launch, program_for, refusals)
from autotune.probe.parse import format_cpulist
from autotune.probe import probe
from autotune.recommend.recommendation import Recommendation
from autotune.run.runner import free_port
from autotune.run.tee import prefix
from autotune.study.storage import describe_study, open_storage, open_study, study_name
from results_study import live_topology, make_study, study_copy

MACHINES = REPO / "tests" / "fixtures" / "machines"
PLAIN_DDP = str(REPO / "benchmarks" / "workloads" / "plain_ddp.py")


@pytest.fixture
def db(tmp_path):
    return study_copy(tmp_path / "results")


def launch(capsys, *argv):
    rc = main(["launch", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _one_line_refusal(rc: int, out: str, err: str, expect: str) -> None:
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autotune: error: ") and expect in lines[0], err


def _manifest(capsys, tmp_path, storage_args: list[str]) -> Path:
    """What `autotune export --format json` writes, as a user would save it."""
    assert main(["export", *storage_args, "--format", "json"]) == 0
    path = tmp_path / "launch.json"
    path.write_text(capsys.readouterr().out)
    return path


def _other_machine_storage(tmp_path: Path, config: Config) -> str:
    """A study searched and verified on a two-socket Xeon (a captured machine), read back here."""
    topo = probe(str(MACHINES / "xeon-2s-icx"), collect_capabilities=False)
    topo = dataclasses.replace(topo, capabilities=dataclasses.replace(
        topo.capabilities, numactl=True, numactl_membind=True, taskset=True,
        allocators={"tcmalloc": "/opt/lib/libtcmalloc.so.4"}))
    return _verified_storage(tmp_path, config, topo)


def _verified_storage(tmp_path: Path, config: Config, topo=None) -> str:
    """A study whose verified recommendation is `config` (this machine's unless `topo`)."""
    topo = topo or live_topology()
    url = f"sqlite:///{tmp_path}/{topo.fingerprint()}.db"
    study = open_study(open_storage(url), study_name("cnn", topo))
    describe_study(study, topology=topo, workload="cnn", space={}, settings={})
    save_recommendation(study, Recommendation(config=config, speedup=1.3, spread=0.02, rounds=3,
                                              verified=True), topo, "cnn")
    return url


# ---------------------------------------------------------------- plans (no processes)

def test_ranks_get_exactly_the_exported_environment_and_binding(tmp_path):
    topo = live_topology()
    config = Config(nproc=2, threads=1, binding="taskset", allocator="tcmalloc")
    program = (sys.executable, PLAIN_DDP, "--steps", "5")
    exported = launch_command(config, topo, program=program, script=True)
    base = {"PATH": "/usr/bin", "HOME": "/root", "LD_PRELOAD": "/stale.so", "OMP_NUM_THREADS": "9"}
    plan = plan_launch(config, topo, program, log_dir=str(tmp_path), base_env=base, port=29555)
    for rank, (env, argv) in zip(plan.ranks, exported.ranks):
        assert rank.argv == argv                      # binding prefix + the user's command
        want = {**exported.env, **env, "MASTER_PORT": "29555"}
        assert {k: rank.env[k] for k in want} == want
        assert rank.env["PATH"] == "/usr/bin"         # the user's own environment is kept ...
    assert plan.ranks[0].env["LD_PRELOAD"] != "/stale.so"   # ... except what the plan owns
    assert plan.ranks[0].env["OMP_NUM_THREADS"] == "1"


def test_nodes_renumber_ranks_for_a_static_rendezvous(tmp_path):
    topo = live_topology()
    plan = plan_launch(Config(nproc=2, threads=1), topo, ("python", "t.py"), log_dir=str(tmp_path),
                       base_env={}, port=1, nodes=Nodes(nnodes=3, node_rank=2,
                                                        master_addr="host0", master_port=29400))
    assert [r.env["RANK"] for r in plan.ranks] == ["4", "5"]
    assert [r.env["LOCAL_RANK"] for r in plan.ranks] == ["0", "1"]
    assert {(r.env["WORLD_SIZE"], r.env["MASTER_ADDR"], r.env["MASTER_PORT"], r.env["GROUP_RANK"])
            for r in plan.ranks} == {("6", "host0", "29400", "2")}
    with pytest.raises(Exception, match="--node-rank 3"):
        Nodes(nnodes=3, node_rank=3, master_addr="h", master_port=1)


def test_refusals_name_hardware_torch_and_verification():
    topo = live_topology()
    here = topo.fingerprint()
    good = TunedConfig(config=Config(), source="study s", fingerprint=here,
                       torch_version="2.13.0+cpu", verified=True)
    assert refusals(good, topo, "2.13.0+cpu") == []
    other = dataclasses.replace(good, fingerprint="3f2c329ea4d8")
    assert refusals(other, topo, "2.13.0+cpu") == [
        f"study s was measured on other hardware (topology 3f2c329ea4d8; this machine is {here})"]
    assert "measured with torch 2.8.0" in refusals(dataclasses.replace(
        good, torch_version="2.8.0"), topo, "2.13.0+cpu")[0]
    assert "no verified recommendation" in refusals(dataclasses.replace(
        good, verified=False), topo, "2.13.0+cpu")[0]


def test_nproc_per_node_overrides_and_says_so():
    topo = live_topology()
    tuned = Config(nproc=1, threads=topo.num_usable_cores(), allocator="tcmalloc")
    config, notes = override(tuned, topo, nproc_per_node=2)
    assert config.nproc == 2 and config.allocator == "tcmalloc"
    if topo.num_usable_cores() < 4:   # 2 ranks x all cores would not fit: threads sized per rank
        assert config.threads is None and "sized to each rank's cores" in notes[0]
    assert notes[0].startswith("--nproc-per-node 2 overrides the recommendation's 1 rank(s)")
    assert override(tuned, topo, nproc_per_node=None) == (tuned, [])


def test_placeholders_are_filled_and_missing_ones_are_named():
    tuned = TunedConfig(config=Config(), source="x", fingerprint=None, torch_version=None,
                        verified=True)
    config = Config(batch_size=64, precision="bf16")
    program, notes = program_for(tuned, ("python", "t.py", "--bs", "{batch_size}"), config)
    assert program == ("python", "t.py", "--bs", "64")
    assert notes and "precision=bf16" in notes[0] and "batch_size" not in notes[0]
    with pytest.raises(Exception, match="holds no training command"):
        program_for(tuned, None, config)
    builtin, _ = program_for(dataclasses.replace(tuned, workload="mlp"), None, config)
    # the trainer launch starts imports nothing from the current folder (docs/security.md)
    assert builtin[:6] == python_module("autotune.worker", "--workload", "mlp")
    assert "--set=precision=bf16" in builtin


def test_exit_code_is_the_worst_rank_that_failed_by_itself():
    assert exit_code((0, 0)) == 0
    assert exit_code((0, 3, 1)) == 3
    # rank 1 failed with 3; the runner then stopped rank 0 with SIGTERM: 3 is the reason
    assert exit_code((-15, 3), stopped_by_us=(0,)) == 3
    assert exit_code((-2, -2)) == 130                                  # Ctrl-C
    assert exit_code((0, None)) == 1                                   # never reaped
    assert prefix(3, 12) == "[rank3]:  " and prefix(11, 12) == "[rank11]: "


# ---------------------------------------------------------------- refusals through the CLI

def test_manifest_from_another_fingerprint_is_refused(tmp_path, capsys):
    fits_here = Config(nproc=1, threads=1, allocator="default")
    path = _manifest(capsys, tmp_path, ["--storage", _other_machine_storage(tmp_path, fits_here)])
    xeon = probe(str(MACHINES / "xeon-2s-icx"), collect_capabilities=False).fingerprint()
    assert json.loads(path.read_text())["manifest"]["fingerprint"] == xeon
    rc, out, err = launch(capsys, "--config", str(path), "--dry-run", "--", sys.executable, PLAIN_DDP)
    _one_line_refusal(rc, out, err, f"manifest {path} was measured on other hardware "
                                    f"(topology {xeon}")
    assert "--force launches it anyway" in err
    rc, out, err = launch(capsys, "--config", str(path), "--force", "--dry-run", "--",
                          sys.executable, PLAIN_DDP)
    assert rc == 0 and "warning: manifest" in err and "(--force)" in err
    assert "OMP_NUM_THREADS=1" in out and PLAIN_DDP in out


def test_study_from_other_hardware_and_unverified_studies_are_refused(tmp_path, capsys):
    url = _other_machine_storage(tmp_path, Config(nproc=1, threads=1))
    rc, out, err = launch(capsys, "--storage", url, "--", sys.executable, PLAIN_DDP)
    _one_line_refusal(rc, out, err, "was measured on other hardware")
    bare = tmp_path / "bare" / "autotune.db"
    bare.parent.mkdir()
    make_study(bare, verify_rec=False)
    rc, out, err = launch(capsys, "--results", str(bare.parent), "--", sys.executable, PLAIN_DDP)
    _one_line_refusal(rc, out, err, "has no recommendation")
    rc, out, err = launch(capsys, "--config", str(tmp_path / "missing.json"))
    _one_line_refusal(rc, out, err, "--config")


@pytest.mark.parametrize("argv, expect", [
    (["--nnodes", "2"], "--nnodes 2: give --master-addr"),
    (["--nnodes", "2", "--node-rank", "2", "--master-addr", "h"], "--node-rank 2: must be 0..1"),
    (["--config", "{tmp}/nope.json"], "--config {tmp}/nope.json: cannot read it"),
    (["--config", "{tmp}/other.json"], "not a launch manifest"),
    (["--config", "{tmp}/other.json", "--storage", "sqlite:///x.db"], "not both"),
    (["--", "no-such-program-xyz"], "command 'no-such-program-xyz' not found"),
    (["--nproc-per-node", "64"], "--nproc-per-node 64: "),
    (["--check-seconds", "-1"], "--check-seconds -1: must be 0"),
])
def test_bad_launch_input_is_one_line_and_runs_nothing(db, tmp_path, capsys, argv, expect):
    (tmp_path / "other.json").write_text('{"format": "something else"}')
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    if "--" not in argv:
        argv += ["--", sys.executable, PLAIN_DDP]
    rc, out, err = launch(capsys, "--results", str(db.parent), "--log-dir",
                          str(tmp_path / "logs"), *argv)
    _one_line_refusal(rc, out, err, expect.replace("{tmp}", str(tmp_path)))
    assert not (tmp_path / "logs").exists()


def test_local_manifest_dry_run_with_torchrun_flags(db, tmp_path, capsys):
    path = _manifest(capsys, tmp_path, ["--results", str(db.parent)])
    assert from_manifest(str(path)).verified
    rc, out, err = launch(capsys, "--config", str(path), "--dry-run", "--nproc-per-node", "1",
                          "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1",
                          "--log-dir", str(tmp_path / "logs"), "--", sys.executable, PLAIN_DDP)
    assert rc == 0, err
    assert "--nproc-per-node 1 overrides the recommendation's 2 rank(s)" in err
    assert "this host is node 1 (ranks 1-1 of 2)" in err
    assert "rank 0: " in out and "RANK=1 " in out and "WORLD_SIZE=2" in out
    assert "MASTER_ADDR=10.0.0.1" in out and not (tmp_path / "logs").exists()   # ran nothing


# ---------------------------------------------------------------- real launches

@pytest.mark.slow
def test_launch_runs_a_plain_ddp_script_with_the_tuned_configuration(tmp_path, capsys):
    """The must-show: a plain DDP script, two bound ranks with tcmalloc, and the configuration
    seen acting from outside the processes (measure/observe.py, as for script-mode trials)."""
    topo = live_topology()
    if not topo.capabilities.taskset or not topo.capabilities.allocators.get("tcmalloc"):
        pytest.skip("needs taskset and tcmalloc (setup.sh installs them)")
    tuned = Config(nproc=2, threads=1, binding="taskset", allocator="tcmalloc")
    logs = tmp_path / "logs"
    rc, out, err = launch(capsys, "--storage", _verified_storage(tmp_path, tuned), "--log-dir",
                          str(logs), "--check-seconds", "4", "--", sys.executable, PLAIN_DDP,
                          "--steps", "400", "--report-every", "100")
    assert rc == 0, err
    assert "launching 2 rank(s) with nproc=2 threads=1 binding=taskset allocator=tcmalloc" in err
    assert "[rank0]: step 400 throughput:" in out            # rank-prefixed on the terminal
    assert "step 400 throughput:" in (logs / "rank0.log").read_text()   # and kept in the log
    assert sorted(p.name for p in logs.glob("rank*.log")) == ["rank0.log", "rank1.log"]
    assert "in force, seen from outside the ranks: every planned knob acted" in err, err
    plan = plan_launch(tuned, topo, ("x",), log_dir=str(tmp_path), base_env={}, port=1)
    for rank in plan.ranks:
        cpus = format_cpulist(rank.cpus)
        # 1 compute thread, plus gloo's I/O thread when it shows busy in the samples
        assert re.search(rf"rank {rank.rank}: [12] busy thread\(s\) \(planned 1\), cpus {cpus}, "
                         r"allocator tcmalloc, OpenMP libgomp", err), err


@pytest.mark.slow
def test_a_script_that_undoes_the_configuration_is_named(tmp_path, capsys):
    topo = live_topology()
    if not topo.capabilities.taskset or len(topo.usable_cpus) < 2:
        pytest.skip("needs taskset and 2 CPUs")
    job = _script(tmp_path, """
        import os, time
        os.sched_setaffinity(0, os.sched_getaffinity(0) | {%s})   # the script rebinds itself
        end = time.time() + 10
        while time.time() < end:
            sum(range(10000))
    """ % ", ".join(map(str, topo.usable_cpus)))
    tuned = Config(threads=1, binding="taskset")
    planned = plan_launch(tuned, topo, ("x",), log_dir=str(tmp_path), base_env={}, port=1)
    rc, out, err = launch(capsys, "--storage", _verified_storage(tmp_path, tuned), "--log-dir",
                          str(tmp_path / "logs"), "--check-seconds", "2", "--", sys.executable, job)
    assert rc == 0, err
    assert f"warning: cpus {format_cpulist(planned.ranks[0].cpus)} planned; rank 0 ran on cpus" in err
    assert "1 planned knob(s) did not act" in err


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


@pytest.mark.slow
def test_a_failing_rank_stops_the_others_and_sets_the_exit_code(tmp_path, capsys):
    storage = ["--storage", f"sqlite:///{study_copy(tmp_path / 'r')}"]
    job = _script(tmp_path, """
        import os, sys, time
        print("up", flush=True)
        if os.environ["RANK"] == "1":
            sys.exit(3)
        time.sleep(600)
    """)
    start = time.monotonic()
    rc, out, err = launch(capsys, *storage, "--nproc-per-node", "2", "--log-dir",
                          str(tmp_path / "logs"), "--", sys.executable, job)
    assert rc == 3 and time.monotonic() - start < 60
    assert "[rank0]: up" in out and "[rank1]: up" in out
    assert "rank 0: -15" in err and "rank 1: 3" in err


def _launch_in_background(tmp_path: Path, db: Path, job: str) -> subprocess.Popen[str]:
    """`autotune launch` of `job` on 2 ranks in its own process, its output piped back."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    return subprocess.Popen([sys.executable, "-m", "autotune", "launch", "--storage",
                             f"sqlite:///{db}", "--nproc-per-node", "2", "--log-dir",
                             str(tmp_path / "logs"), "--", sys.executable, job],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.slow
def test_ctrl_c_stops_every_rank_and_their_children(tmp_path):
    db = study_copy(tmp_path / "r")
    job = _script(tmp_path, """
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        print("child", child.pid, flush=True)
        time.sleep(600)
    """)
    proc = _launch_in_background(tmp_path, db, job)
    children = []
    while len(children) < 2:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        if "child" in line:
            children.append(int(line.split()[-1]))
    ranks = [c.pid for c in psutil.Process(proc.pid).children()]
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    for pid in ranks + children:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.slow
def test_ranks_end_when_launch_itself_is_killed(tmp_path):
    """SIGKILL reaches no handler of autotune's: the ranks (each in its own session) must still
    end, or a hung pair keeps the cores busy after the launch is gone."""
    db = study_copy(tmp_path / "r")
    job = _script(tmp_path, """
        import time
        print("up", flush=True)
        time.sleep(600)
    """)
    proc = _launch_in_background(tmp_path, db, job)
    for _ in range(2):
        assert "up" in proc.stdout.readline(), proc.stderr.read()
    ranks = [psutil.Process(c.pid) for c in psutil.Process(proc.pid).children()]
    assert len(ranks) == 2
    proc.kill()
    proc.wait(timeout=10)
    gone, alive = psutil.wait_procs(ranks, timeout=10)
    assert not alive, [p.cmdline() for p in alive]


@pytest.mark.slow
def test_two_launches_form_one_job_across_nodes(tmp_path):
    """--nnodes 2 on each of two 'hosts' (here both this machine): one job of 2 x 2 ranks."""
    db = study_copy(tmp_path / "r")
    job = _script(tmp_path, """
        import os, torch, torch.distributed as dist
        dist.init_process_group("gloo")
        t = torch.tensor([float(dist.get_rank())])
        dist.all_reduce(t)
        print("world", dist.get_world_size(), "rank", dist.get_rank(), "sum", int(t.item()),
              flush=True)
        dist.destroy_process_group()
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    port = str(free_port())
    procs = [subprocess.Popen([sys.executable, "-m", "autotune", "launch", "--storage",
                               f"sqlite:///{db}", "--nproc-per-node", "2", "--nnodes", "2",
                               "--node-rank", str(node), "--master-addr", "127.0.0.1",
                               "--master-port", port, "--check-seconds", "0", "--log-dir",
                               str(tmp_path / f"node{node}"), "--", sys.executable, job],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for node in (0, 1)]
    outs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    for node, (out, err) in enumerate(outs):
        assert f"this host is node {node} (ranks {2 * node}-{2 * node + 1} of 4)" in err
        for local in (0, 1):
            assert f"[rank{local}]: world 4 rank {2 * node + local} sum 6" in out


def test_a_script_is_read_as_script_mode_reads_it(db, tmp_path, capsys):
    """--local-rank passed to scripts that take it, and lines that defeat a tuned knob named."""
    job = _script(tmp_path, """
        import argparse, torch
        p = argparse.ArgumentParser()
        p.add_argument("--local-rank", type=int, default=0)
        torch.set_num_threads(4)
    """)
    rc, out, err = launch(capsys, "--results", str(db.parent), "--dry-run", "--",
                          sys.executable, job)
    assert rc == 0, err
    assert f"{job} --local-rank=0" in out and f"{job} --local-rank=1" in out
    # the recommendation's threads: 1, or auto (the plan gives each of 2 ranks one thread)
    assert f"note: {job}:5 " in err and re.search(r"threads=(1|auto) will not act", err)
