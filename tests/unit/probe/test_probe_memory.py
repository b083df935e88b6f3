"""The probe sees where memory lives: each node's kind (DRAM, HBM, CXL), size, free memory, tier
and speed, the weighted-interleave weights and numa_balancing, on the captured machines of
tests/fixtures/machines (issue 37: a Xeon Max in flat SNC4 and a 2-socket machine with a CXL
expander per socket, written by make_fixtures.py from the sources its comments name)."""
from __future__ import annotations

import os
import shutil

import pytest

from autotune.errors import ProbeError
from autotune.probe import capture, probe
from autotune.probe.memory import Memory, nearest_cpu_node, parse_mem_free
from autotune.probe.topology import Topology
from paths import MACHINES

GIB = 1024 ** 3


def machine(name: str, root=None) -> Topology:
    return probe(str(root or MACHINES / name), collect_capabilities=False)


def test_xeon_max_flat_snc4_has_four_hbm_nodes_beside_four_ddr_quadrants():
    t = machine("xeon-max-snc4-flat")
    assert [(n.id, len(n.cpus), n.memory_bytes // GIB) for n in t.numa_nodes] == [
        (0, 28, 32), (1, 28, 32), (2, 28, 32), (3, 28, 32),
        (4, 0, 16), (5, 0, 16), (6, 0, 16), (7, 0, 16)]
    m = t.memory
    assert m.nodes_of("dram") == (0, 1, 2, 3) and m.nodes_of("hbm") == (4, 5, 6, 7)
    assert m.nodes_of("cxl") == ()
    # the HBM is boot memory: the same tier as DDR, told apart by the firmware's bandwidth
    assert {n.tier for n in m.nodes} == {4}
    assert (m.node(4).read_bandwidth_mibs, m.node(0).read_bandwidth_mibs) == (390625, 73242)
    assert m.node(5).free_bytes == 16 * GIB * 9 // 10 // 1024 * 1024
    # each quadrant's own HBM is the nearest to it (13), another quadrant's further (14)
    assert t.distances[0] == (10, 12, 12, 12, 13, 14, 14, 14)
    assert [nearest_cpu_node(h, t.numa_nodes, t.distances) for h in (4, 5, 6, 7)] == [0, 1, 2, 3]
    assert m.numa_balancing == 1
    assert m.weighted_interleave.weights == tuple((n, 1) for n in range(8))


def test_two_sockets_with_a_cxl_expander_each():
    t = machine("xeon-2s-cxl")
    m = t.memory
    assert [(n.id, n.memory_only, round(n.memory_bytes / GIB, 1)) for n in t.numa_nodes] == [
        (0, False, 62.7), (1, False, 63.0), (2, True, 64.0), (3, True, 128.0)]
    assert m.nodes_of("dram") == (0, 1) and m.nodes_of("cxl") == (2, 3)
    assert [m.node(n).tier for n in range(4)] == [4, 4, 22, 22]   # dax/kmem's slower tier
    assert t.distances == ((10, 21, 14, 24), (21, 10, 24, 14), (14, 24, 10, 26), (24, 14, 26, 10))
    assert [nearest_cpu_node(n, t.numa_nodes, t.distances) for n in (2, 3)] == [0, 1]
    wi = m.weighted_interleave
    assert wi.weights == ((0, 1), (1, 1), (2, 1), (3, 1)) and wi.writable and wi.auto is None
    assert m.numa_balancing == 2


def test_kinds_follow_the_firmware_figures_without_tiers_and_fall_back_to_dram(tmp_path):
    root = tmp_path / "cxl"
    shutil.copytree(MACHINES / "xeon-2s-cxl", root)
    shutil.rmtree(root / "devices/virtual")          # a kernel before memory tiers (6.1)
    assert machine("", root).memory.nodes_of("cxl") == (2, 3)   # 51.2 against 307.2 GB/s
    for n in range(4):                                # no HMAT either: nothing says CXL
        shutil.rmtree(root / f"devices/system/node/node{n}/access0")
    assert machine("", root).memory.nodes_of("dram") == (0, 1, 2, 3)


def test_xeon_max_quadrant_capture_without_hmat_is_known_by_its_cpu():
    """The older flat-mode capture has neither tiers nor HMAT: only the CPU (a Xeon CPU Max)
    says that its memory-only nodes are the package's HBM."""
    m = machine("spr-max-hbm-flat").memory
    assert m.nodes_of("hbm") == (2, 3) and m.nodes_of("dram") == (0, 1)
    assert m.weighted_interleave is None and m.numa_balancing is None


@pytest.mark.parametrize("name", ["xeon-2s-icx", "epyc-7763-nps4", "desktop-8c16t",
                                  "live-epyc-zen5-2cpu", "vm-quirks"])
def test_machines_without_memory_only_nodes_are_all_dram(name):
    m = machine(name).memory
    assert {n.kind for n in m.nodes} == {"dram"}
    assert [n.id for n in m.nodes] == [n.id for n in machine(name).numa_nodes]


def test_memory_facts_round_trip_through_json_and_leave_the_fingerprint_alone(tmp_path):
    for name in ("xeon-max-snc4-flat", "xeon-2s-cxl"):
        t = machine(name)
        back = Topology.from_json(t.to_json())
        assert back.memory == t.memory and back.fingerprint() == t.fingerprint()
    assert Memory.from_json(None) == Memory()
    # free memory moves all the time: it must not make the machine a stranger to its studies
    root = tmp_path / "cxl"
    shutil.copytree(MACHINES / "xeon-2s-cxl", root)
    meminfo = root / "devices/system/node/node0/meminfo"
    meminfo.write_text(meminfo.read_text().replace("MemFree:", "MemFree: 1").replace(
        "MemFree: 1 ", "MemFree:  1"))
    moved = machine("", root)
    assert moved.memory.node(0).free_bytes != machine("xeon-2s-cxl").memory.node(0).free_bytes
    assert moved.fingerprint() == machine("xeon-2s-cxl").fingerprint()


def test_the_live_machine_is_captured_with_its_memory_facts(tmp_path):
    """This machine (one node, kernel 6.18) has numa_balancing, memory tiers and a weighted
    interleave folder whose auto file this kernel names __auto_type: all captured and replayed."""
    dest = tmp_path / "live"
    capture(str(dest))
    live, replay = probe(collect_capabilities=False), machine("", dest)
    assert replay.memory.numa_balancing == live.memory.numa_balancing
    with open("/proc/sys/kernel/numa_balancing") as f:
        assert live.memory.numa_balancing == int(f.read())
    assert replay.memory.weighted_interleave == live.memory.weighted_interleave
    assert [(n.id, n.kind, n.tier) for n in replay.memory.nodes] == \
        [(n.id, n.kind, n.tier) for n in live.memory.nodes]
    if os.path.isdir("/sys/kernel/mm/mempolicy/weighted_interleave"):
        assert live.memory.weighted_interleave is not None
        assert live.memory.weighted_interleave.writable == os.access(
            "/sys/kernel/mm/mempolicy/weighted_interleave/node0", os.W_OK)


def test_parsers_on_literal_text(tmp_path):
    assert parse_mem_free("Node 3 MemTotal: 8 kB\nNode 3 MemFree:     2 kB\n") == 2048
    assert parse_mem_free("Node 3 MemTotal: 8 kB\n") is None
    root = tmp_path / "cxl"
    shutil.copytree(MACHINES / "xeon-2s-cxl", root)
    weights = root / "kernel/mm/mempolicy/weighted_interleave"
    (weights / "__auto_type").write_text("true\n")
    (weights / "node0").write_text("6\n")
    (root / "weighted_interleave.writable").write_text("no\n")
    wi = machine("", root).memory.weighted_interleave
    assert (wi.auto, wi.weight(0), wi.weight(2), wi.writable) == (True, 6, 1, False)


@pytest.mark.parametrize("rel, text, needle", [
    ("devices/virtual/memory_tiering/memory_tier22/nodelist", "2-x\n", "memory_tier22/nodelist"),
    ("devices/system/node/node2/access0/initiators/read_bandwidth", "fast\n", "read_bandwidth"),
    ("kernel/mm/mempolicy/weighted_interleave/node1", "heavy\n", "weighted_interleave/node1"),
    ("numa_balancing", "yes\n", "numa_balancing"),
])
def test_garbled_memory_files_name_the_path(tmp_path, rel, text, needle):
    root = tmp_path / "cxl"
    shutil.copytree(MACHINES / "xeon-2s-cxl", root)
    (root / rel).write_text(text)
    with pytest.raises(ProbeError, match=needle):
        machine("", root)
