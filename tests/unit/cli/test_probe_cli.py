"""`autotune probe` through the real CLI entry point: JSON contract, live machine, capture and
replay, and bad input (one line on stderr naming the path, exit 2, no traceback)."""
from __future__ import annotations

from paths import TESTS
import json
import os
import re
import shutil

import pytest

from autotune.cli import main
from autotune.probe.topology import Topology

MACHINES = os.path.join(str(TESTS), "fixtures", "machines")
CAPABILITY_KEYS = {"allocators", "omp_runtimes", "backends", "torch_version", "ipex",
                   "ccl_problem", "numactl", "numactl_membind", "taskset", "cxx_compiler",
                   "torchvision", "warnings"}


def probe_json(capsys, *args: str) -> dict:
    assert main(["probe", "--json", *args]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1  # exactly one JSON object on one line
    return json.loads(out)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """One live probe and one capture, shared: each live probe imports torch in a subprocess."""
    from autotune.probe import capture, probe
    dest = tmp_path_factory.mktemp("capture") / "live"
    written = capture(str(dest))
    return probe(), str(dest), written


def test_json_contract_on_the_live_machine(capsys):
    d = probe_json(capsys)
    types = {"sockets": int, "logical_cpus": int, "physical_cores": int, "usable_cpus": list,
             "numa_nodes": list, "cores": list, "isa": dict, "gpus": list, "allocators": dict,
             "backends": list}
    for key, typ in types.items():
        assert isinstance(d[key], typ), key
    assert d["logical_cpus"] >= len(d["usable_cpus"]) >= 1
    assert set(d["usable_cpus"]) == set(os.sched_getaffinity(0)) & set(
        c for core in d["cores"] for c in core)
    assert all(set(n) >= {"id", "cpus", "memory_bytes"} for n in d["numa_nodes"])
    assert all(isinstance(c, int) for core in d["cores"] for c in core)
    assert sum(len(core) for core in d["cores"]) == d["logical_cpus"]
    assert d["physical_cores"] == len(d["cores"])
    assert set(d["allocators"]) == {"jemalloc", "tcmalloc"}
    assert all(v is None or isinstance(v, str) for v in d["allocators"].values())
    assert "gloo" in d["backends"] and set(d["isa"]) >= {"vendor", "model_name", "flags"}
    assert Topology.from_json(d).to_json() == d  # the contract reads back


def test_json_contract_on_fixtures(capsys):
    d = probe_json(capsys, "--sysfs-root", os.path.join(MACHINES, "spr-max-hbm-flat"))
    assert (d["sockets"], d["logical_cpus"], d["physical_cores"]) == (2, 224, 112)
    assert [n["cpus"] == [] for n in d["numa_nodes"]] == [False, False, True, True]
    assert d["cores"][0] == [0, 112] and d["usable_cpus"] == list(range(224))
    d = probe_json(capsys, "--sysfs-root", os.path.join(MACHINES, "dgx-h100-8gpu"))
    assert len(d["gpus"]) == 8 and d["gpus"][7] == {
        "index": 7, "name": "NVIDIA H100 80GB HBM3", "memory_bytes": 81559 * 1024 ** 2,
        "numa_node": 1, "cpu_affinity": list(range(56, 112)) + list(range(168, 224))}
    assert d["gpu_links"][0][1] == "NV18"


def test_human_table(capsys):
    assert main(["probe", "--sysfs-root", os.path.join(MACHINES, "xeon-2s-restricted")]) == 0
    out = capsys.readouterr().out
    assert "Intel(R) Xeon(R) Platinum 8358" in out
    assert "usable: 8 cores / 16 CPUs (8-15,72-79), cgroup quota 2 CPUs -> plans use 2 cores" in out
    assert re.search(r"node 0 +256.0 GiB +0-31,64-95", out)
    assert "siblings e.g. 0/64" in out and "allocators" in out and "backends" in out
    assert main(["probe", "--sysfs-root", os.path.join(MACHINES, "spr-max-hbm-flat")]) == 0
    assert "memory only (no CPUs)" in capsys.readouterr().out


def test_capture_then_replay_is_identical(live, capsys):
    topo, dest, written = live
    assert os.path.join(dest, "devices", "system", "cpu", "online") in written
    assert all(os.path.isfile(p) for p in written)
    replay = probe_json(capsys, "--sysfs-root", dest)
    original = topo.to_json()
    for d in (replay, original):   # free memory moves between the probe and the capture
        for node in d["memory"]["nodes"]:
            node.pop("free_bytes")
    assert {k: v for k, v in replay.items() if k not in CAPABILITY_KEYS} == \
        {k: v for k, v in original.items() if k not in CAPABILITY_KEYS}


def test_capture_flag_says_where(tmp_path, capsys):
    dest = tmp_path / "cap"
    assert main(["probe", "--capture", str(dest), "--sysfs-root",
                 os.path.join(MACHINES, "pcie-4gpu")]) == 0
    out = capsys.readouterr().out
    assert f"into {dest}" in out and "--sysfs-root" in out
    assert (dest / "nvidia-smi-topo-m.txt").is_file()
    original = probe_json(capsys, "--sysfs-root", os.path.join(MACHINES, "pcie-4gpu"))
    assert probe_json(capsys, "--sysfs-root", str(dest)) == original


def bad(capsys, root: str, *extra: str) -> str:
    assert main(["probe", *extra, "--sysfs-root", root]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err
    assert err.count("\n") == 1 and err.startswith("autotune: error: ")
    assert "Traceback" not in err
    return err


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "m"
    shutil.copytree(os.path.join(MACHINES, "desktop-8c16t"), root)
    return root


def test_missing_root(tmp_path, capsys):
    missing = str(tmp_path / "nope")
    assert f"sysfs root {missing}: no such directory" in bad(capsys, missing)
    assert f"{missing}: no such directory" in bad(capsys, missing, "--json")


def test_root_is_a_file(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    assert "not a directory" in bad(capsys, str(f))


def test_empty_root(tmp_path, capsys):
    assert f"sysfs root {tmp_path}: devices/system/cpu/online missing" in bad(capsys, str(tmp_path))


def test_garbled_online(tree, capsys):
    (tree / "devices/system/cpu/online").write_text("\x00\x01garbage\n")
    assert f"{tree}/devices/system/cpu/online" in bad(capsys, str(tree))


def test_unreadable_file_as_directory(tree, capsys):
    # Tests run as root, so chmod 000 would not stop a read: a directory where the kernel
    # would have a file fails the same way an unreadable file does.
    path = tree / "devices/system/node/node0/meminfo"
    path.unlink()
    path.mkdir()
    assert f"{path}: is a directory, expected a file" in bad(capsys, str(tree))


def test_garbled_gpu_text(tree, capsys):
    (tree / "nvidia-smi-query-gpu.csv").write_text("Unable to determine the device handle\n")
    assert f"{tree}/nvidia-smi-query-gpu.csv" in bad(capsys, str(tree))


def test_capture_into_a_file(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["probe", "--capture", str(target)]) == 2
    assert f"capture directory {target}" in capsys.readouterr().err


def test_capture_refuses_a_non_empty_directory(tmp_path, capsys):
    (tmp_path / "old-file").write_text("from another machine")
    assert main(["probe", "--capture", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"capture directory {tmp_path}: not empty" in err and err.count("\n") == 1
