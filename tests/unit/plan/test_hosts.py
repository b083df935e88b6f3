"""Hosts across machines: the parsers (literal text), the plans and the exports (no processes)."""
from __future__ import annotations

from paths import TESTS
import dataclasses
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.bind import local_rank_env, pick, plan_index, rank_env
from autotune.commands.hosts import Hosts, asked_hosts
from autotune.config import Config
from autotune.errors import ConfigError
from autotune.export.command import launch_command, render
from autotune.plan.hosts import (Host, differences, expand_nodelist, expand_per_node,
                            interface_of, network_of, node_address, other_slurm_task,
                            parse_hostfile, parse_hosts, slurm_hosts, ssh_hostname,
                            within_allocation)
from autotune.plan.cluster import (Cluster, build_cluster_plan, cluster_from_json, cluster_to_json,
                                infeasible_on_cluster)
from autotune.probe import probe
from autotune.probe.topology import Capabilities

MACHINES = TESTS / "fixtures" / "machines"
CAPS = Capabilities(allocators={"jemalloc": "/lib/libjemalloc.so.2", "tcmalloc": None},
                    omp_runtimes={"libgomp": None, "libiomp5": None},
                    backends=("gloo", "ccl"), numactl=True, numactl_membind=True, taskset=True)


def machine(name: str = "xeon-2s-icx"):
    topo = probe(str(MACHINES / name), collect_capabilities=False)
    return dataclasses.replace(topo, capabilities=CAPS)


def cluster(launcher: str = "ssh", n: int = 2, **kw) -> Cluster:
    topo = machine()
    return Cluster(hosts=tuple(Host(name=f"node{i}", slots=kw.pop("slots", None))
                               for i in range(1, n + 1)),
                   addresses=tuple(f"10.0.0.{i}" for i in range(1, n + 1)),
                   topologies=(topo,) * n, launcher=launcher, iface="ib0",
                   subnet="10.0.0.0/24", ssh_config="/etc/at/ssh_config", python="/v/bin/python",
                   cwd="/work", **kw)


def cplan(config: Config, c: Cluster, **kw):
    return build_cluster_plan(config, c, workdir="/r/t1", master_port=29555,
                              base_env={"PATH": "/usr/bin", "SECRET": "x"}, trial_id="t1", **kw)


# ---------------------------------------------------------------- parsers

def test_hosts_option_with_and_without_slots():
    assert parse_hosts("a:2, b:4") == (Host(name="a", slots=2), Host(name="b", slots=4))
    assert parse_hosts("root@a,b") == (Host(name="root@a"), Host(name="b"))


@pytest.mark.parametrize("text, needle", [("a,,b", "empty host name"), ("a:x", "whole number"),
                                          ("a:0", "at least 1"), ("a,a", "named twice"),
                                          ("-oProxy=x", "not a host name"), ("a b", "not a host")])
def test_hosts_option_errors_name_the_problem(text, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_hosts(text)


def test_hostfile_open_mpi_and_deepspeed_format():
    text = "# cluster\nnode1 slots=8\nnode2 slots=8 max_slots=16  # big\n\nnode3\n"
    assert parse_hostfile(text) == (Host(name="node1", slots=8), Host(name="node2", slots=8),
                                    Host(name="node3"))
    with pytest.raises(ConfigError, match="hf:2: unknown field 'gpus'"):
        parse_hostfile("a slots=1\nb gpus=2\n", where="hf")
    with pytest.raises(ConfigError, match="no hosts"):
        parse_hostfile("# nothing\n")


@pytest.mark.parametrize("text, names", [
    ("node[01-03,07]", ("node01", "node02", "node03", "node07")),
    ("a1,b[8-10]", ("a1", "b8", "b9", "b10")),
    ("r[1-2]-ib[0-1]", ("r1-ib0", "r1-ib1", "r2-ib0", "r2-ib1")),
    ("gpu[009-011],cpu5", ("gpu009", "gpu010", "gpu011", "cpu5")),
])
def test_slurm_compressed_nodelist(text, names):
    assert expand_nodelist(text) == names


@pytest.mark.parametrize("text", ["n[3-1]", "n[a-b]", "n[1-]", "a,,b"])
def test_bad_nodelist_is_an_error(text):
    with pytest.raises(ConfigError):
        expand_nodelist(text)


@pytest.mark.parametrize("text, counts", [
    ("2(x3),1", (2, 2, 2, 1)), ("48", (48,)), ("2(x2)", (2, 2)),
    ("36,72(x2),36", (36, 72, 72, 36)), (" 4(x1) , 8", (4, 8)),
])
def test_slurm_per_node_counts_compressed_form(text, counts):
    assert expand_per_node(text) == counts


@pytest.mark.parametrize("text", ["", "2(x)", "x2", "2(x0)", "2,,1", "-1", "2(x3", "2x3"])
def test_bad_per_node_counts_name_the_variable(text):
    with pytest.raises(ConfigError, match=r"SLURM_JOB_CPUS_PER_NODE=.*cannot read"):
        expand_per_node(text)


def test_slurm_slots_are_the_cpus_of_each_node_not_its_tasks():
    # `salloc -N2 --exclusive` then `srun -N2 --ntasks-per-node=1 autotune search`: one task
    # per node, yet 2 CPUs each are the job's, and a trial may put 2 ranks on each.
    env = {"SLURM_JOB_NODELIST": "n[1-3]", "SLURM_JOB_CPUS_PER_NODE": "4(x2),2",
           "SLURM_NTASKS_PER_NODE": "1", "SLURM_TASKS_PER_NODE": "1(x3)"}
    assert slurm_hosts(env) == (Host(name="n1", slots=4), Host(name="n2", slots=4),
                                Host(name="n3", slots=2))
    assert slurm_hosts({"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NTASKS_PER_NODE": "8"}) == (
        Host(name="n1"), Host(name="n2"))    # no CPU count: the plan decides
    assert slurm_hosts({}) is None
    with pytest.raises(ConfigError, match="counts 2 node.*SLURM_JOB_NODELIST='n\\[1-3\\]' 3"):
        slurm_hosts({"SLURM_JOB_NODELIST": "n[1-3]", "SLURM_JOB_CPUS_PER_NODE": "4(x2)"})
    with pytest.raises(ConfigError, match="0 CPUs"):
        slurm_hosts({"SLURM_JOB_NODELIST": "n1", "SLURM_JOB_CPUS_PER_NODE": "0"})


def test_hosts_named_in_an_allocation_must_be_its_nodes():
    alloc = (Host(name="n1", slots=4), Host(name="n2", slots=4), Host(name="n3", slots=2))
    assert within_allocation(parse_hosts("n3,n1:2"), alloc) == (Host(name="n3", slots=2),
                                                                 Host(name="n1", slots=2))
    with pytest.raises(ConfigError, match=r"^--hosts: n9 is not a node of this SLURM allocation "
                                          r"\(n1, n2, n3\); .*--launcher ssh"):
        within_allocation(parse_hosts("n1,n9"), alloc)


def test_only_slurm_task_zero_runs_the_search():
    assert other_slurm_task({}, "search") is None                        # not under srun
    assert other_slurm_task({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"}, "search") is None
    note = other_slurm_task({"SLURM_PROCID": "1", "SLURM_NTASKS": "2"}, "search")
    assert note is not None and note.startswith("SLURM task 1 of 2: task 0 runs the search")
    assert "\n" not in note


def test_node_address_from_scontrol():
    text = ("NodeName=sl1 Arch=x86_64 CoresPerSocket=2\n   CPUAlloc=0 CPUEfctv=2 CPUTot=2\n"
            "   NodeAddr=10.231.78.11 NodeHostName=sl1 Version=22.05.8\n   OS=Linux 6.1\n")
    assert node_address(text) == "10.231.78.11"
    assert node_address("Node nope not found\n") is None


def _args(**kw):
    return Hosts(**kw)


def test_hosts_from_args_sources(tmp_path):
    assert asked_hosts(_args(), env={}) is None
    # One node of SLURM is this machine: the single-host path stays as it was.
    assert asked_hosts(_args(), env={"SLURM_JOB_NODELIST": "n1"}) is None
    hosts, launcher = asked_hosts(_args(), env={"SLURM_JOB_NODELIST": "n[1-2]"})
    assert launcher == "srun" and [h.name for h in hosts] == ["n1", "n2"]
    hf = tmp_path / "hosts"
    hf.write_text("x slots=2\ny slots=2\n")
    assert asked_hosts(_args(hostfile=str(hf), launcher="mpirun"), env={})[1] == "mpirun"
    with pytest.raises(ConfigError, match="not both"):
        asked_hosts(_args(hosts="a", hostfile=str(hf)), env={})
    with pytest.raises(ConfigError, match="need --hosts"):
        asked_hosts(_args(launcher="mpirun"), env={})
    with pytest.raises(ConfigError, match="(?i)no such file"):
        asked_hosts(_args(hostfile=str(tmp_path / "nope")), env={})


ALLOC = {"SLURM_JOB_NODELIST": "n[1-3]", "SLURM_JOB_CPUS_PER_NODE": "8(x3)"}


def test_hosts_inside_an_allocation_go_through_srun_and_must_be_its_nodes(tmp_path):
    hosts, launcher = asked_hosts(_args(hosts="n2,n3"), env=ALLOC)
    assert launcher == "srun" and hosts == (Host(name="n2", slots=8), Host(name="n3", slots=8))
    hf = tmp_path / "hosts"
    hf.write_text("n1 slots=2\nother slots=2\n")
    with pytest.raises(ConfigError, match=f"--hostfile {hf}: other is not a node"):
        asked_hosts(_args(hostfile=str(hf)), env=ALLOC)
    # ssh to other machines stays possible, when asked for
    hosts, launcher = asked_hosts(_args(hosts="a,b", launcher="ssh"), env=ALLOC)
    assert launcher == "ssh" and [h.name for h in hosts] == ["a", "b"]
    with pytest.raises(ConfigError, match="--ssh-config is for ssh.*--launcher ssh"):
        asked_hosts(_args(hosts="n1,n2", ssh_config=str(hf)), env=ALLOC)
    with pytest.raises(ConfigError, match="--launcher srun .* not one .*salloc"):
        asked_hosts(_args(hosts="n1,n2", launcher="srun"), env={})


def test_an_ssh_config_that_would_add_ssh_options_is_refused_before_any_ssh(tmp_path, capsys):
    """Issue 46: mpirun passes `-F CONFIG` to ssh through plm_rsh_args, split at spaces, so a
    config path `x -oProxyCommand=CMD` would have ssh run CMD; typed or stored, it is refused."""
    from autotune.cli import main
    cfg = tmp_path / "ssh config"
    cfg.write_text("")
    for bad in (f"{cfg} -oProxyCommand=touch{tmp_path}/owned", "-oProxyCommand=true", str(cfg)):
        rc = main(["search", "--hosts", "a,b", "--launcher", "mpirun", f"--ssh-config={bad}",
                   "--budget", "1m", "--results", str(tmp_path / "r")])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and "would reach ssh or mpirun as an option" in err[0]
    assert not (tmp_path / "r").exists()
    topo = probe(str(MACHINES / "xeon-2s-icx"), collect_capabilities=False)
    with pytest.raises(ConfigError, match="python '-Sx': refused"):
        Cluster(hosts=(Host(name="a"),), addresses=("10.0.0.1",), topologies=(topo,), python="-Sx")


def test_a_node_outside_the_allocation_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from autotune.cli import main
    for k, v in ALLOC.items():
        monkeypatch.setenv(k, v)
    rc = main(["search", "--hosts", "n1,gpu7", "--budget", "1m", "--results", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("autotune: error: --hosts: gpu7 is not a node of this SLURM "
                             "allocation (n1, n2, n3)")
    assert list(tmp_path.iterdir()) == []          # nothing made, nothing stored


def test_srun_tasks_but_task_zero_leave_the_search_to_it(tmp_path, monkeypatch, capsys):
    from autotune.cli import main
    for k, v in {**ALLOC, "SLURM_PROCID": "2", "SLURM_NTASKS": "3"}.items():
        monkeypatch.setenv(k, v)
    for command in (["search", "--budget", "1m"], ["run", "--set", "nproc=2"]):
        assert main([*command, "--results", str(tmp_path)]) == 0
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("autotune: SLURM task 2 of 3: task 0 runs")
        assert list(tmp_path.iterdir()) == []


IP_ADDR = """1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever
2: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0\\       valid_lft forever
3: ib0@if7    inet 10.0.0.1/16 scope global ib0\\       valid_lft forever"""


def test_interface_and_subnet_holding_the_first_hosts_address():
    assert interface_of(IP_ADDR, "10.0.0.1") == "ib0"
    assert network_of(IP_ADDR, "10.0.0.1") == "10.0.0.0/16"
    assert interface_of(IP_ADDR, "10.9.9.9") is None
    assert ssh_hostname("user root\nhostname 10.231.77.11\nport 22\n") == "10.231.77.11"


def test_hosts_that_differ_are_named_with_the_difference():
    a = machine().to_json()
    b = {**a, "physical_cores": a["physical_cores"] // 2, "usable_cpus": [0]}
    c = {**a, "allocators": {"jemalloc": "/other/path/libjemalloc.so.2", "tcmalloc": None}}
    assert differences({"n1": a, "n2": c}) == []    # a library elsewhere is still the library
    diff = differences({"n1": a, "n2": b})
    assert diff and diff[0].startswith("n2: physical_cores")


# ---------------------------------------------------------------- plans across hosts

def test_ssh_plan_starts_each_hosts_ranks_through_the_shim_without_torchrun():
    c = cluster()
    p = cplan(Config(nproc=4, nnodes=2, binding="numactl"), c)
    assert [h for h, _argv, _log in p.launchers] == ["node1", "node2"]
    for i, (_h, argv, _log) in enumerate(p.launchers):
        assert argv[:3] == ("ssh", "-F", "/etc/at/ssh_config")
        remote = shlex.split(argv[-1])
        assert remote[:3] == ["cd", "/work", "&&"]
        assert "torch.distributed.run" not in remote     # no agent: the shim starts the ranks
        shim = remote.index("autotune.bind")
        for arg in ("MASTER_ADDR=10.0.0.1", "MASTER_PORT=29555", "WORLD_SIZE=4"):
            assert arg in remote[:shim]
        for arg in (f"--node-rank={i}", "--local-ranks=2"):
            assert arg in remote[shim:remote.index("--", shim)]
        assert "GLOO_SOCKET_IFNAME=ib0" in remote and "AUTOTUNE_TRIAL_MARKER=t1" in remote
        assert "SECRET=x" not in remote            # only what a rank needs is forwarded
    # 4 planned ranks, each host's two bound to its own sockets; expectations in plan order.
    assert [r.mem_node for r in p.ranks] == [0, 1, 0, 1]
    assert len(p.request.ranks) == 4 and p.request.config["nnodes"] == 2
    assert p.ranks[0].env["MASTER_ADDR"] == "10.0.0.1"
    assert len(p.host_kill) == 2 and p.host_kill[1][-1].endswith("autotune.run.remote kill t1")
    # a ccl trial's kill also clears the shared memory its dead ranks left on each host
    ccl = cplan(Config(nproc=4, nnodes=2, backend="ccl"), cluster("ssh"))
    assert all(k[-1].endswith("autotune.run.remote kill t1 --ccl") for k in ccl.host_kill)


def test_ssh_export_runs_one_torchrun_per_host_with_c10d_rendezvous():
    p = cplan(Config(nproc=4, nnodes=2, binding="numactl"), cluster(), export=True)
    for i, (_h, argv, _log) in enumerate(p.launchers):
        remote = shlex.split(argv[-1])
        for arg in ("torch.distributed.run", "--nnodes=2", "--nproc-per-node=2",
                    "--rdzv-backend=c10d", "--rdzv-endpoint=10.0.0.1:29555",
                    f"--local-addr=10.0.0.{i + 1}",
                    f"--rdzv-conf=is_host={int(i == 0)},join_timeout=60", f"--node-rank={i}"):
            assert arg in remote
        assert "AUTOTUNE_TRIAL_MARKER=t1" not in remote and "--local-ranks=2" not in remote


def test_ssh_reuses_one_connection_per_host_only_where_a_control_folder_is_given():
    shared = cluster(control_dir="/tmp/autotune-ssh-7").ssh("node1", "true")
    assert "ControlMaster=auto" in shared and "ControlPath=/tmp/autotune-ssh-7/%C" in shared
    assert any(a.startswith("ControlPersist=") for a in shared)
    assert not any(a.startswith("Control") for a in cluster().ssh("node1", "true"))
    # the study stores the hosts, not this machine's sockets: an export connects afresh
    assert cluster_from_json(cluster_to_json(cluster(control_dir="/x"))).control_dir is None
    live = cluster(control_dir="/tmp/autotune-ssh-7")     # the search's own, as it saves
    cmd = launch_command(Config(nproc=2, nnodes=2), live.topologies[0],
                         program=("python", "train.py"), cluster=live)
    assert "Control" not in render(cmd, "torchrun")


def test_mpirun_plan_is_one_open_mpi_command_with_env_and_per_rank_binding():
    p = cplan(Config(nproc=4, nnodes=2, binding="taskset", allocator="jemalloc"), cluster("mpirun"))
    (_h, argv, _log), = p.launchers
    argv = list(argv)
    assert argv[:4] == ["mpirun", "--allow-run-as-root", "-np", "4"]
    assert argv[argv.index("-H") + 1] == "node1:2,node2:2"
    assert argv[argv.index("--map-by") + 1] == "ppr:2:node"
    assert "oob_tcp_if_include" in argv and "10.0.0.0/24" in argv
    xs = [argv[i + 1] for i, a in enumerate(argv) if a == "-x"]
    assert "MASTER_ADDR=10.0.0.1" in xs and any(x.startswith("LD_PRELOAD=") for x in xs)
    cpus = next(a for a in argv if a.startswith("--cpus="))
    assert len(cpus.split(";")) == 4 and "--tool=taskset" in argv


def test_srun_plan_passes_env_through_env_not_export():
    p = cplan(Config(nproc=2, nnodes=2, allocator="jemalloc"), cluster("srun"))
    (_h, argv, _log), = p.launchers
    assert argv[0] == "srun" and "--ntasks-per-node=1" in argv and "--nodelist=node1,node2" in argv
    # a step beside the one running the search (`srun ... autotune search`), on every CPU the
    # job has on its nodes (--cpus-per-task would imply --exact)
    srun_options = argv[:argv.index("env")]
    assert "--overlap" in argv and not any(a.startswith(("--cpus-per-task", "-c"))
                                           for a in srun_options)
    assert all("--overlap" in k for k in p.host_kill)
    assert not any(a.startswith("--export") for a in argv)     # MALLOC_CONF has commas
    assert any(a.startswith("MALLOC_CONF=") for a in argv)


@pytest.mark.parametrize("config, c, needle", [
    (Config(nproc=3, nnodes=3), cluster(), "only 2 host"),
    (Config(nproc=2, nnodes=2, backend="mpi"), cluster(), "needs the mpirun launcher"),
    (Config(nproc=8, nnodes=2), cluster(slots=2), "has 2 slot"),
])
def test_infeasible_across_hosts(config, c, needle):
    assert needle in infeasible_on_cluster(config, c)


def test_nnodes_without_hosts_is_refused_and_keys_of_old_studies_stay():
    assert "nnodes" not in Config().key()
    assert "nnodes=2" in Config(nproc=2, nnodes=2).key()
    with pytest.raises(ConfigError, match="multiple of nnodes"):
        Config(nproc=3, nnodes=2)


def test_cluster_survives_the_study_round_trip():
    c = cluster()
    assert cluster_from_json(cluster_to_json(c)) == c


# ---------------------------------------------------------------- the rank shim

def test_shim_maps_every_launchers_rank_variables():
    ompi = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    assert rank_env(ompi) == {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1",
                              "LOCAL_WORLD_SIZE": "2"}
    assert plan_index({**ompi, **rank_env(ompi)}, None) == 3
    slurm = {"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0"}
    assert rank_env(slurm)["RANK"] == "2"
    # torchrun across hosts: the node rank the plan gave, not the rendezvous order.
    assert plan_index({"RANK": "0", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}, 1) == 3
    assert plan_index({"RANK": "5", "LOCAL_RANK": "1"}, None) == 1
    assert pick("0-3;4-7", 1, "cpus") == "4-7" and pick("x", 5, "cpus") == "x"
    # the shim as the launcher (--local-ranks): torchrun's numbers, host after host
    env = local_rank_env({"WORLD_SIZE": "4"}, node_rank=1, local_rank=1, local_ranks=2)
    assert {k: env[k] for k in ("RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE",
                                "GROUP_RANK")} == {"RANK": "3", "LOCAL_RANK": "1",
                                                   "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "4",
                                                   "GROUP_RANK": "1"}
    assert plan_index(env, 1) == 3


# ---------------------------------------------------------------- exports

def test_export_formats_across_hosts():
    c = cluster()
    config = Config(nproc=4, nnodes=2, binding="numactl")
    cmd = launch_command(config, c.topologies[0], program=("python", "train.py"), cluster=c)
    torchrun = render(cmd, "torchrun")
    assert torchrun.count("--nnodes=2") == 2 and "--rdzv-endpoint=10.0.0.1:29500" in torchrun
    assert "AUTOTUNE_TRIAL_MARKER" not in torchrun and "--rank-log" not in torchrun
    mpirun = render(cmd, "mpirun")
    assert "mpirun --allow-run-as-root -np 4 -H node1:2,node2:2" in mpirun
    script = render(cmd, "slurm")
    assert script.startswith("#!/bin/bash\n") and "#SBATCH --nodes=2" in script
    assert "#SBATCH --ntasks-per-node=2" in script and "\nsrun " in script
    assert 'first=$(scontrol show hostnames "$SLURM_JOB_NODELIST"' in script
    assert 'export MASTER_ADDR="${addr:-$first}"' in script       # NodeAddr, else the name
    assert "--overlap" not in script       # the batch script's steps are the only ones
    assert "MASTER_ADDR=10.0.0.1" not in script        # the allocation decides, not the study
    with pytest.raises(ConfigError, match="json exports one machine"):
        render(cmd, "json")


def test_single_host_torchrun_export_keeps_per_rank_ccl_env():
    topo = machine()
    cmd = launch_command(Config(nproc=2, backend="ccl", binding="numactl"), topo,
                         program=("python", "train.py"))
    text = render(cmd, "torchrun")
    # every local rank gets the whole host's worker cores; oneCCL takes its own by CCL_LOCAL_RANK
    local = [e["CCL_LOCAL_RANK"] for e, _argv in cmd.ranks]
    assert local == ["0", "1"] and "CCL_WORKER_COUNT=1" in text
    assert "--env=CCL_LOCAL_RANK=0;1" in shlex.split(text.splitlines()[-1])
    mpirun = render(cmd, "mpirun")        # a single machine exports to mpirun too
    assert "-np 2" in mpirun and "CCL_LOCAL_RANK=0;1" in mpirun


@pytest.mark.parametrize("launcher, tool", [("mpirun", "openmpi-bin"), ("srun", "slurm-client"),
                                            ("ssh", "openssh-client")])
def test_missing_launcher_is_one_line(launcher, tool, tmp_path, monkeypatch, capsys):
    from autotune.cli import main
    monkeypatch.setenv("PATH", str(tmp_path))          # nothing on PATH
    if launcher == "srun":     # srun only means something inside an allocation
        monkeypatch.setenv("SLURM_JOB_NODELIST", "a,b")
    rc = main(["run", "--hosts", "a,b", "--launcher", launcher, "--set", "nnodes=2",
               "--set", "nproc=2", "--results", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and f"apt-get install {tool}" in err[0]
    assert not (tmp_path / "trials").exists()


def test_mpi_backend_only_under_mpirun():
    from autotune.run.trial import TrialSettings, trial_infeasible
    topo = dataclasses.replace(machine(), capabilities=dataclasses.replace(
        CAPS, backends=("gloo", "mpi")))
    assert "started by mpirun" in trial_infeasible(Config(backend="mpi"), topo, TrialSettings())
    c = dataclasses.replace(cluster("mpirun"), topologies=(topo, topo))
    assert trial_infeasible(Config(nproc=2, nnodes=2, backend="mpi"), topo,
                            TrialSettings(cluster=c)) is None


def test_two_allocations_searched_from_one_login_node_take_two_locks(tmp_path):
    """`salloc ... autotune search` twice from one login node: other nodes, other locks; the
    same nodes twice: refused as two searches on one machine are."""
    from autotune.errors import LockError
    from autotune.search.lock import MachineLock, machine_key
    assert machine_key("fp") == "fp"
    first = MachineLock(machine_key("fp", ("n1", "n2")), directory=str(tmp_path)).acquire()
    other = MachineLock(machine_key("fp", ("n3", "n4")), directory=str(tmp_path)).acquire()
    with pytest.raises(LockError, match="another autotune search is running"):
        MachineLock(machine_key("fp", ("n1", "n2")), directory=str(tmp_path)).acquire()
    first.release()
    other.release()


@pytest.mark.parametrize("launcher", ["ssh", "mpirun", "srun"])
def test_every_python_a_cluster_trial_starts_drops_the_current_folder(launcher):
    """Issue 46, item 4: the ranks, the rank shim and the kill helper on every host start through
    a `-c` line that removes the current folder from the import path before anything is
    imported (the hosts' Python is of a version unknown here, so no -P)."""
    from autotune.util.child_python import python_module
    p = cplan(Config(nproc=2, nnodes=2), cluster(launcher))
    argvs = [argv for _h, argv, _log in p.launchers] + list(p.host_kill)
    words = [w for argv in argvs for a in argv
             for w in (shlex.split(a) if a.startswith("cd ") else [a])]
    starts = [i for i, w in enumerate(words) if w == "/v/bin/python"]
    bootstrap = python_module("m", python="/v/bin/python")[2]
    assert len(starts) >= 3 * (1 if launcher != "ssh" else 2)
    assert all(words[i + 1:i + 3] == ["-c", bootstrap] for i in starts), words


@pytest.mark.parametrize("launcher", ["ssh", "mpirun", "srun"])
def test_a_scripts_ranks_across_hosts_get_their_report_and_the_plan_says_where(launcher):
    """Issue 61: in script mode across hosts the plan dropped AUTOTUNE_REPORT from its ranks'
    environment, so the runner never read a script's report_metrics(). Every launcher's command
    gives each rank its report (through the shim, whole) and the plan names it, rank by rank;
    an export, which writes no trial files, carries neither."""
    config = Config(nproc=4, nnodes=2, binding="none")
    p = cplan(config, cluster(launcher), program=("python3", "train.py"), script=True)
    assert [r.env["AUTOTUNE_REPORT"] for r in p.ranks] == [f"/r/t1/rank{i}.report.json"
                                                           for i in range(4)]
    assert [r.env["AUTOTUNE_RESULT"] for r in p.ranks] == [r.result_path for r in p.ranks]
    for _host, argv, _log in p.launchers:
        words = shlex.split(argv[-1]) if launcher == "ssh" else list(argv)
        i = words.index("AUTOTUNE_REPORT=/r/t1/rank{rank}.report.json")
        assert words[i - 1] == "--env-all" and words.index("autotune.bind") < i
    export = cplan(config, cluster(launcher), program=("python3", "train.py"), script=True,
                   export=True)
    assert not any("AUTOTUNE_REPORT" in r.env for r in export.ranks)
    assert not any("AUTOTUNE_REPORT" in w for _h, argv, _l in export.launchers for w in argv)


@pytest.mark.parametrize("launcher", ["ssh", "mpirun", "srun"])
def test_a_scripts_seed_reaches_every_rank_across_hosts(launcher):
    """A script whose command has no {seed} reads $AUTOTUNE_SEED. On one machine the trial adds it
    to each rank; across hosts only what the launchers' command carries reaches a rank, so the
    seed travels there (the paired accuracy gate pairs seeds: an unseeded script pairs nothing).
    An export, a user's own run, carries none."""
    config = Config(nproc=4, nnodes=2, binding="none")
    p = cplan(config, cluster(launcher), program=("python3", "train.py"), script=True,
              script_env={"AUTOTUNE_SEED": "7"})
    assert all(r.env["AUTOTUNE_SEED"] == "7" for r in p.ranks)
    for _host, argv, _log in p.launchers:
        assert any("AUTOTUNE_SEED=7" in w for w in argv)
    export = cplan(config, cluster(launcher), program=("python3", "train.py"), script=True,
                   export=True, script_env={"AUTOTUNE_SEED": "7"})
    assert not any("AUTOTUNE_SEED" in w for _h, argv, _l in export.launchers for w in argv)


def test_a_trial_folder_with_a_semicolon_reaches_each_rank_whole_through_the_real_shim(tmp_path):
    """Issue 61: the shim splits a per-rank list at ';', and the trial's file paths went through
    the same --env, so a --results holding a ';' gave rank 0 the path's first half and rank 1
    its second. Each rank's command from the plan, run for real as mpirun starts it (the rank
    in OMPI's variables): every rank finds its own files, whole."""
    folder = tmp_path / "a;b" / "t1"
    folder.mkdir(parents=True)
    folder.chmod(0o700)
    show = ("import json, os; print(json.dumps({k: os.environ[k] for k in "
            "('AUTOTUNE_RESULT', 'AUTOTUNE_REPORT', 'CCL_LOCAL_RANK')}))")
    c = dataclasses.replace(cluster("mpirun"), python=sys.executable)
    p = build_cluster_plan(Config(nproc=4, nnodes=2, binding="none", backend="ccl"), c,
                           workdir=str(folder), master_port=29555, base_env={}, trial_id="t1",
                           program=(sys.executable, "-c", show), script=True)
    assert any(a.startswith("CCL_LOCAL_RANK=") and ";" in a for a in p.ranks[0].argv)  # a list
    for i, rank in enumerate(p.ranks):
        ompi = {"OMPI_COMM_WORLD_RANK": str(i), "OMPI_COMM_WORLD_SIZE": "4",
                "OMPI_COMM_WORLD_LOCAL_RANK": str(i % 2), "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
        subprocess.run(rank.argv, env={**os.environ, **ompi}, check=True, timeout=60)
        got = json.loads((folder / f"rank{i}.log").read_text())
        assert got == {"AUTOTUNE_RESULT": str(folder / f"rank{i}.json"),
                       "AUTOTUNE_REPORT": str(folder / f"rank{i}.report.json"),
                       "CCL_LOCAL_RANK": str(i % 2)}
        assert {k: rank.env[k] for k in got} == got    # as the plan says
