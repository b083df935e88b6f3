"""mem_policy: each rank's memory where the policy says, on the captured Xeon Max (flat SNC4) and
2-socket + CXL machines, shown by `run --dry-run` on the capture; infeasible mixes ruled out
before launch with one line; the knob not offered where it cannot act (issue 37)."""
from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

from autotune.cli import main
from autotune.config import Config
from autotune.errors import MachineStateError
from autotune.plan.feasible import infeasible_reason
from autotune.plan.memory import offered, wanted_weights
from autotune.probe import probe
from autotune.probe.captured import CAPABILITIES
from autotune.probe.collect_capabilities import collect_capabilities
from autotune.run.weights import apply_weights
from paths import MACHINES

HBM, CXL = MACHINES / "xeon-max-snc4-flat", MACHINES / "xeon-2s-cxl"


def with_new_numactl(tmp_path, src=CXL, writable: str = "yes") -> str:
    """A copy of a capture with the capabilities file its probe writes on a machine whose
    numactl has --weighted-interleave (2.0.19+): this machine's real library and tool facts,
    and that numactl's no-op run succeeding."""
    root = tmp_path / src.name
    shutil.copytree(src, root)
    facts = collect_capabilities()
    facts["results"]["numactl_weighted"] = {"rc": 0, "stdout": "", "stderr": ""}
    (root / CAPABILITIES).write_text(json.dumps({"schema": 1, "facts": facts}))
    (root / "weighted_interleave.writable").write_text(writable + "\n")
    return str(root)


def dry_run(capsys, root, *sets: str) -> tuple[int, dict | None, str]:
    argv = ["run", "--sysfs-root", str(root), "--dry-run", "--json"]
    for s in sets:
        argv += ["--set", s]
    rc = main(argv)
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if rc == 0 else None), out.err


def numactl_memory(rank: dict) -> list[str]:
    """The numactl flags of a rank's argv that place memory."""
    return [a for a in rank["argv"] if a.split("=")[0] in
            ("--membind", "--interleave", "--preferred", "--weighted-interleave")]


def test_xeon_max_each_quadrant_rank_prefers_its_own_hbm(capsys):
    rc, plan, _ = dry_run(capsys, HBM, "nproc=4", "binding=numactl", "mem_policy=preferred_fast")
    assert rc == 0
    assert [numactl_memory(r) for r in plan["ranks"]] == [[f"--preferred={4 + q}"]
                                                          for q in range(4)]
    assert [r["mem_policy"] for r in plan["ranks"]] == [f"preferred:{4 + q}" for q in range(4)]
    assert [r["mem_node"] for r in plan["ranks"]] == [None] * 4
    assert plan["ranks"][2]["cpus"] == list(range(28, 42))


def test_xeon_max_interleave_spreads_a_quadrants_pages_over_its_ddr_and_hbm(capsys):
    rc, plan, _ = dry_run(capsys, HBM, "nproc=4", "binding=numactl", "mem_policy=interleave")
    assert [numactl_memory(r) for r in plan["ranks"]] == [[f"--interleave={q},{4 + q}"]
                                                          for q in range(4)]
    # local is the launch as it always was: --membind to the rank's own node
    rc, plan, _ = dry_run(capsys, HBM, "nproc=4", "binding=numactl")
    assert [numactl_memory(r) for r in plan["ranks"]] == [[f"--membind={q}"] for q in range(4)]


def test_an_unbound_rank_spans_every_node_and_interleaves_over_all(capsys):
    rc, plan, _ = dry_run(capsys, HBM, "mem_policy=interleave")
    (rank,) = plan["ranks"]
    assert rank["argv"][:2] == ["numactl", "--interleave=0-7"] and rank["cpus"] is None
    rc, _, err = dry_run(capsys, HBM, "mem_policy=preferred_fast")
    assert rc == 2 and "spans HBM nodes 4-7" in err and len(err.strip().splitlines()) == 1


def test_cxl_weighted_interleave_by_bandwidth_per_socket(tmp_path, capsys):
    root = with_new_numactl(tmp_path)
    rc, plan, err = dry_run(capsys, root, "nproc=2", "binding=numactl", "mem_policy=weighted")
    assert rc == 0
    assert [numactl_memory(r) for r in plan["ranks"]] == [["--weighted-interleave=0,2"],
                                                          ["--weighted-interleave=1,3"]]
    # 307.2 GB/s of DDR5 against 51.2 GB/s of CXL: 6 pages to 1, written before a real run
    assert "echo 6 > /sys/kernel/mm/mempolicy/weighted_interleave/node0" in err
    assert "echo 1 > /sys/kernel/mm/mempolicy/weighted_interleave/node3" in err
    assert "a dry run changes nothing" in err
    rc, plan, _ = dry_run(capsys, root, "nproc=2", "binding=numactl", "mem_policy=interleave")
    assert [numactl_memory(r) for r in plan["ranks"]] == [["--interleave=0,2"],
                                                          ["--interleave=1,3"]]


def test_preferred_fast_without_fast_memory_names_what_the_probe_found(capsys):
    rc, _, err = dry_run(capsys, CXL, "nproc=2", "binding=numactl", "mem_policy=preferred_fast")
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "no high-bandwidth memory (DRAM on nodes 0-1, CXL on nodes 2-3)" in err
    # this machine: one node of DRAM
    assert main(["run", "--dry-run", "--set", "mem_policy=preferred_fast"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no high-bandwidth memory (DRAM on node 0)" in err


def test_a_weight_file_that_cannot_be_written_is_one_line_and_changes_nothing(tmp_path, capsys):
    root = with_new_numactl(tmp_path, writable="no")
    weights = tmp_path / CXL.name / "kernel/mm/mempolicy/weighted_interleave"
    before = {p.name: p.read_text() for p in weights.iterdir()}
    rc, _, err = dry_run(capsys, root, "nproc=2", "binding=numactl", "mem_policy=weighted")
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "weighted_interleave/node0 is not writable by this user" in err
    assert "echo 6 > /sys/kernel/mm/mempolicy/weighted_interleave/node0" in err
    assert {p.name: p.read_text() for p in weights.iterdir()} == before


def test_the_weights_are_written_all_or_nothing(tmp_path):
    topo = probe(str(CXL), collect_capabilities=False)
    assert wanted_weights(topo) == {0: 6, 1: 6, 2: 1, 3: 1}
    folder = tmp_path / "weighted_interleave"
    folder.mkdir()
    for n in range(4):
        (folder / f"node{n}").write_text("1\n")
    assert apply_weights(topo, weights_dir=str(folder)) == [(0, 1, 6), (1, 1, 6)]
    assert [(folder / f"node{n}").read_text() for n in range(4)] == ["6\n", "6\n", "1\n", "1\n"]
    assert apply_weights(topo, weights_dir=str(folder)) == []        # already right
    # a node file that refuses the write puts back what was written. Here a read-only sysctl
    # (mode 0444: refused even to root) holding a number stands in for node1
    for n in range(4):
        (folder / f"node{n}").write_text("1\n")
    (folder / "node1").unlink()
    (folder / "node1").symlink_to("/proc/sys/kernel/ngroups_max")
    with pytest.raises(MachineStateError, match=r"cannot write .*node1 .*nothing changed") as exc:
        apply_weights(topo, weights_dir=str(folder))
    assert "\n" not in str(exc.value)
    assert (folder / "node0").read_text() == "1\n"
    # the kernel's auto mode sets them itself from the same bandwidths: nothing to write
    auto = dataclasses.replace(topo, memory=dataclasses.replace(
        topo.memory, weighted_interleave=dataclasses.replace(
            topo.memory.weighted_interleave, auto=True, weights=((0, 5), (1, 5), (2, 2), (3, 2)))))
    assert apply_weights(auto, weights_dir=str(folder)) == []
    assert wanted_weights(auto) == {0: 5, 1: 5, 2: 2, 3: 2}


@pytest.mark.parametrize("sets, needle", [
    (("nproc=4", "binding=taskset", "mem_policy=interleave"), "taskset binds CPUs only"),
    (("nproc=4", "binding=numactl", "mem_policy=weighted"), "no CXL (slower-tier) memory"),
])
def test_infeasible_mixes_are_ruled_out_before_launch(capsys, sets, needle):
    rc, _, err = dry_run(capsys, HBM, *sets)
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_a_policy_on_one_node_is_ruled_out(capsys):
    """Two sockets without memory-only nodes: a bound rank has one node to interleave over;
    an unbound one spans both."""
    icx = MACHINES / "xeon-2s-icx"
    rc, _, err = dry_run(capsys, icx, "nproc=2", "binding=numactl", "mem_policy=interleave")
    assert rc == 2 and "a rank on node 0 has only node 0 to interleave over" in err
    rc, plan, _ = dry_run(capsys, icx, "mem_policy=interleave")
    assert rc == 0 and plan["ranks"][0]["argv"][:2] == ["numactl", "--interleave=0-1"]
    # this machine has one node: interleave cannot run, and the space does not offer it
    topo = probe()
    assert offered(topo) == ("local",)
    assert "one NUMA node (DRAM on node 0)" in infeasible_reason(
        Config(mem_policy="interleave"), topo)


def test_the_plan_text_shows_each_ranks_numactl_memory_flags(capsys):
    assert main(["run", "--sysfs-root", str(HBM), "--dry-run", "--set", "nproc=4", "--set",
                 "binding=numactl", "--set", "mem_policy=preferred_fast"]) == 0
    out = capsys.readouterr().out
    assert "rank 1: cpus 14-27, memory --preferred=5," in out
    assert "numactl --physcpubind=14-27 --preferred=5 " in out


def test_exports_carry_the_policy(tmp_path):
    from autotune.export.command import launch_command, render
    topo = probe(with_new_numactl(tmp_path, src=HBM), collect_capabilities=True)
    cmd = launch_command(Config(nproc=4, binding="numactl", mem_policy="preferred_fast"), topo)
    torchrun = render(cmd, "torchrun")
    assert "--mem=preferred:4;preferred:5;preferred:6;preferred:7" in torchrun
    assert "--preferred=6" in render(cmd, "shell")
    cxl = probe(with_new_numactl(tmp_path / "cxl"), collect_capabilities=True)
    shell = render(launch_command(Config(nproc=2, binding="numactl", mem_policy="weighted"),
                                  cxl), "shell")
    assert "--weighted-interleave=1,3" in shell
    assert "# mem_policy=weighted interleaves by these weights (as root): echo 6 >" in shell


def test_across_hosts_the_weights_must_be_set_on_each_host_already():
    from autotune.plan.cluster import Cluster, infeasible_on_cluster
    from autotune.plan.hosts import Host
    cxl = dataclasses.replace(probe(str(CXL), collect_capabilities=False),
                              capabilities=dataclasses.replace(
                                  probe(collect_capabilities=True).capabilities,
                                  numactl_weighted=True, numactl_membind=True))
    hosts = (Host(name="a", slots=None), Host(name="b", slots=None))
    cluster = Cluster(hosts=hosts, topologies=(cxl, cxl), launcher="ssh",
                      addresses=("10.0.0.1", "10.0.0.2"))
    why = infeasible_on_cluster(Config(nproc=4, nnodes=2, binding="numactl",
                                       mem_policy="weighted"), cluster)
    assert why.startswith("a: mem_policy=weighted across hosts: set the weights on each host")
    assert "echo 6 > /sys/kernel/mm/mempolicy/weighted_interleave/node0" in why
