"""Probe parsers on every fixture machine, with the exact numbers each one must give."""
from __future__ import annotations

from paths import TESTS
import os
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.errors import ProbeError
from autotune.probe import probe
from autotune.probe.topology import Topology
from autotune.probe.parse import (format_cpulist, parse_cpu_max, parse_cpuinfo, parse_cpulist,
                                  parse_node_meminfo)

MACHINES = os.path.join(str(TESTS), "fixtures", "machines")
GIB = 1024 ** 3


def machine(name: str):
    return probe(os.path.join(MACHINES, name), collect_capabilities=False)


def sibling_pairs(topo) -> set[tuple[int, ...]]:
    return {c.cpus for c in topo.cores}


# ---- cpulist and friends ---------------------------------------------------------------------
@pytest.mark.parametrize("text, cpus", [
    ("0-3,8,10-11\n", (0, 1, 2, 3, 8, 10, 11)),
    ("", ()),
    ("\n", ()),
    ("5", (5,)),
    (" 0-1 , 4\n", (0, 1, 4)),
    ("0-1\n2-3", (0, 1, 2, 3)),
    ("0-7:2/4", (0, 1, 4, 5)),  # the kernel's group syntax: 2 of every 4
])
def test_parse_cpulist(text, cpus):
    assert parse_cpulist(text) == cpus


@pytest.mark.parametrize("text", ["0-", "a", "3-1", "0-3:0/4", "1,,x"])
def test_parse_cpulist_garbled_names_the_file(text):
    with pytest.raises(ProbeError, match="/some/file"):
        parse_cpulist(text, where="/some/file")


@settings(deadline=None)  # shared CI boxes are loaded; correctness, not speed, is tested
@given(st.sets(st.integers(min_value=0, max_value=1023)))
def test_cpulist_round_trip(cpus):
    assert parse_cpulist(format_cpulist(cpus)) == tuple(sorted(cpus))


def test_format_cpulist_is_compact():
    assert format_cpulist([64, 0, 1, 2, 3, 65, 9]) == "0-3,9,64-65"


def test_node_meminfo_and_proc_meminfo():
    assert parse_node_meminfo("Node 2 MemTotal:       67108864 kB\nNode 2 MemFree: 1 kB\n") \
        == 64 * GIB
    assert parse_node_meminfo("MemTotal:        6775364 kB\nMemFree: 5 kB\n") == 6775364 * 1024
    with pytest.raises(ProbeError, match="meminfo"):
        parse_node_meminfo("Node 0 MemFree: 1 kB\n")


def test_a_node_is_sized_by_its_memory_blocks_while_its_meminfo_lags(tmp_path):
    """This VM's node 0 meminfo said 6.6 GiB at one probe and 15.7 GiB at the next, of the same
    192 blocks of 128 MiB: the fingerprint moved and the machine's own landscape and studies
    became another machine's. The blocks the kernel placed on the node do not move."""
    prints = set()
    for kib in (6908116, 16476372):   # the two MemTotal readings, in kB
        root = tmp_path / str(kib)
        shutil.copytree(os.path.join(MACHINES, "live-epyc-zen5-2cpu"), root)
        node = root / "devices/system/node/node0"
        (node / "meminfo").write_text(f"Node 0 MemTotal: {kib} kB\nNode 0 MemFree: 1 kB\n")
        for block in range(192):   # a live node holds memoryN links; a capture, their count
            (node / f"memory{block}").mkdir()
        (root / "devices/system/memory").mkdir()
        (root / "devices/system/memory/block_size_bytes").write_text("8000000\n")
        t = probe(str(root), collect_capabilities=False)
        assert t.numa_nodes[0].memory_bytes == 24 * GIB
        prints.add(t.fingerprint())
    assert len(prints) == 1
    # without the blocks (older captures), the meminfo is what there is
    assert machine("live-epyc-zen5-2cpu").numa_nodes[0].memory_bytes == 5990612 * 1024


@pytest.mark.parametrize("text, quota", [
    ("max 100000\n", None),
    ("200000 100000\n", 2.0),
    ("150000 100000\n", 1.5),
    ("-1 100000\n", None),                       # cgroup v1, unlimited
    ("400000 100000\n-1 100000\n150000 100000\n", 1.5),  # tightest level wins
    ("max\n", None),
    ("", None),
])
def test_parse_cpu_max(text, quota):
    assert parse_cpu_max(text) == quota


@pytest.mark.parametrize("text", ["lots 100000", "100000 0", "1 2 3"])
def test_parse_cpu_max_garbled(text):
    with pytest.raises(ProbeError, match="cpu.max"):
        parse_cpu_max(text)


def test_parse_cpuinfo_arm_and_empty():
    arm = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd sve bf16\nCPU implementer\t: 0x41\n"
    isa = parse_cpuinfo(arm)
    assert (isa.vendor, isa.model_name, isa.flags) == ("arm", "unknown", ())
    assert (isa.family, isa.model, isa.stepping) == (0x41, None, None)
    assert parse_cpuinfo("").vendor == "unknown"


def test_parse_cpuinfo_family_model_stepping():
    """Two CPU generations under one model name ("AMD EPYC" in a VM) differ in CPUID family."""
    text = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"
            "model name\t: AMD EPYC\nstepping\t: 1\nflags\t\t: fpu avx2 avx_vnni\n")
    isa = parse_cpuinfo(text)
    assert (isa.vendor, isa.model_name, isa.family, isa.model, isa.stepping) == \
        ("amd", "AMD EPYC", 26, 2, 1)
    assert isa.flags == ("avx2", "avx_vnni")
    assert isa.describe() == "AMD EPYC (amd family 26 model 2 stepping 1)"
    garbled = parse_cpuinfo(text.replace("stepping\t: 1", "stepping\t: unknown"))
    assert garbled.stepping is None and garbled.family == 26


# ---- whole machines --------------------------------------------------------------------------
def test_xeon_two_sockets_siblings_n_and_n_plus_64():
    t = machine("xeon-2s-icx")
    assert (t.sockets, len(t.cores), len(t.logical_cpus)) == (2, 64, 128)
    assert sibling_pairs(t) == {(n, n + 64) for n in range(64)}
    assert [c.socket for c in t.cores] == [0] * 32 + [1] * 32
    assert [(n.id, n.cpus) for n in t.numa_nodes] == [
        (0, tuple(range(32)) + tuple(range(64, 96))), (1, tuple(range(32, 64)) + tuple(range(96, 128)))]
    assert [n.memory_bytes for n in t.numa_nodes] == [256 * GIB, 256 * GIB]
    assert t.distances == ((10, 20), (20, 10))
    assert t.usable_cpus == tuple(range(128)) and t.cpu_quota is None
    assert t.num_usable_cores() == 64
    assert (t.isa.vendor, t.isa.flags) == (
        "intel", ("avx2", "avx512_vnni", "avx512bw", "avx512f", "avx512vl", "fma"))
    assert "Platinum 8358" in t.isa.model_name and not t.isa.bf16
    assert [c.node for c in t.cores[:32]] == [0] * 32 and t.cores[32].node == 1


def test_epyc_nps4_four_nodes_on_one_socket():
    t = machine("epyc-7763-nps4")
    assert (t.sockets, len(t.cores), len(t.logical_cpus)) == (1, 64, 128)
    assert sibling_pairs(t) == {(n, n + 64) for n in range(64)}
    assert [n.id for n in t.numa_nodes] == [0, 1, 2, 3]
    assert t.numa_nodes[1].cpus == tuple(range(16, 32)) + tuple(range(80, 96))
    assert all(n.memory_bytes == 128 * GIB for n in t.numa_nodes)
    assert t.distances == tuple(tuple(10 if i == j else 12 for j in range(4)) for i in range(4))
    assert len(t.compute_nodes()) == 4
    assert t.isa.vendor == "amd" and t.isa.flags == ("avx2", "fma")


def test_desktop_adjacent_siblings():
    t = machine("desktop-8c16t")
    assert (t.sockets, len(t.cores), len(t.logical_cpus)) == (1, 8, 16)
    assert sibling_pairs(t) == {(2 * k, 2 * k + 1) for k in range(8)}
    assert len(t.numa_nodes) == 1 and t.numa_nodes[0].memory_bytes == 32 * GIB
    assert t.distances == ((10,),)


def test_hybrid_desktop_mixed_smt():
    t = machine("desktop-adl-hybrid")
    assert (len(t.cores), len(t.logical_cpus)) == (12, 20)
    assert sibling_pairs(t) == {(2 * k, 2 * k + 1) for k in range(8)} | {(c,) for c in range(16, 20)}


def test_sapphire_rapids_hbm_flat_memory_only_nodes():
    t = machine("spr-max-hbm-flat")
    assert (t.sockets, len(t.cores), len(t.logical_cpus)) == (2, 112, 224)
    assert sibling_pairs(t) == {(n, n + 112) for n in range(112)}
    assert [(n.id, n.memory_only, n.memory_bytes // GIB) for n in t.numa_nodes] == [
        (0, False, 512), (1, False, 512), (2, True, 64), (3, True, 64)]
    assert [n.id for n in t.compute_nodes()] == [0, 1]
    assert t.distances[0] == (10, 21, 13, 23) and t.distances[3] == (23, 13, 23, 10)
    assert {c.node for c in t.cores} == {0, 1}
    assert t.isa.bf16 and t.isa.fp16 and "amx_tile" in t.isa.flags
    assert t.to_json()["numa_nodes"][2] == {"id": 2, "cpus": [], "memory_bytes": 64 * GIB}


def test_affinity_restricted_process_with_quota():
    t = machine("xeon-2s-restricted")
    assert len(t.cores) == 64 and len(t.logical_cpus) == 128  # the machine is still whole
    assert t.usable_cpus == tuple(range(8, 16)) + tuple(range(72, 80))
    assert [c.cpus for c in t.usable_cores()] == [(n, n + 64) for n in range(8, 16)]
    assert t.cpu_quota == 2.0 and t.num_usable_cores() == 2
    assert [n.id for n in t.compute_nodes()] == [0]
    assert any("quota" in w for w in t.warnings)


def test_vm_quirks_offline_cpus_sparse_nodes_missing_files():
    t = machine("vm-quirks")
    assert t.logical_cpus == (0, 1, 2, 3, 4, 5)       # 6-7 offline
    assert sibling_pairs(t) == {(0, 1), (2, 3), (4, 5)}  # from core_cpus_list
    assert t.sockets == 1                               # no physical_package_id -> socket 0
    assert [(n.id, n.cpus) for n in t.numa_nodes] == [(0, (0, 1, 2, 3)), (2, (4, 5))]
    assert t.distances == ((10, 20), (20, 10))
    assert [c.node for c in t.cores] == [0, 0, 2]


def test_gpu_boxes():
    dgx = machine("dgx-h100-8gpu")
    assert len(dgx.gpus) == 8 and dgx.gpus[0].name == "NVIDIA H100 80GB HBM3"
    assert dgx.gpus[0].memory_bytes == 81559 * 1024 ** 2
    assert [g.numa_node for g in dgx.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert dgx.gpus[5].cpu_affinity == tuple(range(56, 112)) + tuple(range(168, 224))
    assert dgx.gpu_links[0] == ("X",) + ("NV18",) * 7
    pcie = machine("pcie-4gpu")
    assert [g.numa_node for g in pcie.gpus] == [0, 0, 1, 1]
    assert pcie.gpu_links[2] == ("SYS", "SYS", "X", "PXB")


def test_live_capture_fixture():
    t = machine("live-epyc-2cpu")
    assert (t.sockets, len(t.cores), t.logical_cpus) == (1, 2, (0, 1))
    assert t.isa.vendor == "amd" and "avx512_bf16" in t.isa.flags
    assert t.cpu_quota is None  # cgroup v1 quota -1
    assert (t.isa.family, t.isa.model, t.isa.stepping) == (25, 17, 1)   # Zen 4


def test_zen4_and_zen5_captures_differ_in_fingerprint():
    """The two machines this project ran on: same core layout, same model name "AMD EPYC",
    different CPU generation. A study measured on one must never pass for the other's."""
    zen4, zen5 = machine("live-epyc-2cpu"), machine("live-epyc-zen5-2cpu")
    assert (zen5.isa.family, zen5.isa.model) == (26, 2) and "avx_vnni" in zen5.isa.flags
    assert [c.cpus for c in zen4.cores] == [c.cpus for c in zen5.cores]
    assert zen4.isa.model_name == zen5.isa.model_name == "AMD EPYC"
    assert zen4.fingerprint() != zen5.fingerprint()
    assert zen4.hardware()["cpu"] != zen5.hardware()["cpu"]
    # the fingerprint survives the JSON a study stores, so a stored machine can be compared
    assert Topology.from_json(zen5.to_json()).fingerprint() == zen5.fingerprint()


# ---- what Linux writes beyond the fixtures ---------------------------------------------------
@pytest.fixture
def tree(tmp_path):
    """A writable copy of the desktop machine to bend into odd shapes."""
    root = tmp_path / "m"
    shutil.copytree(os.path.join(MACHINES, "desktop-8c16t"), root)
    return root


def test_package_id_minus_one_and_no_numa_kernel(tree):
    for cpu in range(16):
        (tree / f"devices/system/cpu/cpu{cpu}/topology/physical_package_id").write_text("-1\n")
    shutil.rmtree(tree / "devices/system/node")
    (tree / "meminfo").write_text("MemTotal:       16384000 kB\nMemFree: 1 kB\n")
    t = probe(str(tree), collect_capabilities=False)
    assert t.sockets == 1 and t.cores[0].socket == 0
    assert [(n.id, n.cpus, n.memory_bytes) for n in t.numa_nodes] == [
        (0, tuple(range(16)), 16384000 * 1024)]


def test_distance_columns_follow_online_nodes(tree):
    node = tree / "devices/system/node"
    (node / "node0/distance").write_text("10 20\n")  # a second online node has no directory
    (node / "online").write_text("0,1\n")
    t = probe(str(tree), collect_capabilities=False)
    assert t.distances == ((10,),)


def test_offline_sibling_and_missing_distance(tree):
    (tree / "devices/system/cpu/online").write_text("0,2-15\n")
    (tree / "devices/system/node/node0/distance").unlink()
    t = probe(str(tree), collect_capabilities=False)
    assert t.cores[0].cpus == (0,) and len(t.cores) == 8
    assert t.distances == ()


@pytest.mark.parametrize("rel, text, needle", [
    ("devices/system/cpu/online", "zero-three\n", "devices/system/cpu/online"),
    ("devices/system/cpu/online", "\n", "no online CPUs"),
    ("devices/system/cpu/cpu3/topology/thread_siblings_list", "3-x\n", "cpu3/topology"),
    ("devices/system/cpu/cpu3/topology/physical_package_id", "zero\n", "physical_package_id"),
    ("devices/system/node/node0/distance", "10 twenty\n", "node0/distance"),
    ("devices/system/node/node0/meminfo", "garbage\n", "node0/meminfo"),
    ("affinity", "99\n", "affinity"),
    ("cpu.max", "unlimited please\n", "cpu.max"),
])
def test_garbled_files_name_the_path(tree, rel, text, needle):
    (tree / rel).write_text(text)
    with pytest.raises(ProbeError, match=needle) as exc:
        probe(str(tree), collect_capabilities=False)
    assert str(tree) in str(exc.value) and "\n" not in str(exc.value)


def test_memory_class_is_stable_while_a_vm_adds_memory():
    """Node 0 of the Zen 5 VM read 5.7 GiB and, twenty minutes later, 9.1 GiB: one machine."""
    from autotune.probe.topology import memory_class_gib
    assert memory_class_gib(5990612 * 1024) == memory_class_gib(9529556 * 1024) == 8
    assert [memory_class_gib(g * GIB) for g in (0, 1, 60, 64, 100, 128, 256)] == \
        [0, 1, 64, 64, 128, 128, 256]


def test_the_gpu_machine_capture_of_2026_11_26():
    """The first capture taken on a GPU (the device machine): a KVM guest of 16 Emerald Rapids
    cores beside one H200. Its `nvidia-smi topo -m` underlines the header with terminal escapes
    (ESC[4m ... ESC[0m), which the parser must read past."""
    topo_m = open(os.path.join(MACHINES, "h200-emr-16c", "nvidia-smi-topo-m.txt")).read()
    assert "\x1b[4m" in topo_m
    t = machine("h200-emr-16c")
    assert [(g.index, g.name, g.numa_node, g.cpu_affinity) for g in t.gpus] == \
        [(0, "NVIDIA H200", 0, tuple(range(16)))]
    assert t.num_usable_cores() == 16 and len(t.logical_cpus) == 16 and len(t.numa_nodes) == 1
    assert t.l3_domains == (tuple(range(16)),)
    assert (t.isa.vendor, t.isa.family, t.isa.model) == ("intel", 6, 207)
    assert {"amx_bf16", "avx512_bf16", "avx512_fp16"} <= set(t.isa.flags)
