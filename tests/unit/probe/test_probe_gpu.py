"""nvidia-smi parsers on real-shaped output: 8-GPU NVLink boxes, a 4-GPU PCIe box, one GPU."""
from __future__ import annotations

from paths import TESTS
import os

import pytest

from autotune.errors import ProbeError
from autotune.probe.gpu import all_nvlink, link_kind, merge, parse_query, parse_topo

FIX = os.path.join(str(TESTS), "fixtures")
MIB = 1024 ** 2


def read(*parts: str) -> str:
    with open(os.path.join(FIX, *parts)) as f:
        return f.read()


def test_dgx_h100_topo_with_nic_columns_and_gpu_numa_id():
    t = parse_topo(read("machines", "dgx-h100-8gpu", "nvidia-smi-topo-m.txt"))
    assert t.gpus == tuple(range(8))
    assert all(len(row) == 8 for row in t.links)
    assert t.links[3] == ("NV18",) * 3 + ("X",) + ("NV18",) * 4
    assert t.numa_affinity == {g: 0 if g < 4 else 1 for g in range(8)}
    assert t.cpu_affinity[0] == tuple(range(56)) + tuple(range(112, 168))
    assert all_nvlink(t.links)


def test_dgx_a100_topo_with_ansi_header_and_mlx5_columns():
    t = parse_topo(read("nvidia-smi", "dgx-a100-topo-m.txt"))
    assert t.gpus == tuple(range(8))
    assert t.links[0] == ("X",) + ("NV12",) * 7
    assert t.numa_affinity == {0: 3, 1: 3, 2: 1, 3: 1, 4: 7, 5: 7, 6: 5, 7: 5}
    assert t.cpu_affinity[6] == tuple(range(80, 96)) + tuple(range(208, 224))
    gpus = parse_query(read("nvidia-smi", "dgx-a100-query-gpu.csv"))
    merged, links = merge(gpus, t)
    assert [g.numa_node for g in merged] == [3, 3, 1, 1, 7, 7, 5, 5]
    assert merged[0].name == "NVIDIA A100-SXM4-40GB" and merged[0].memory_bytes == 40960 * MIB
    assert links == t.links


def test_pcie_box_links():
    t = parse_topo(read("machines", "pcie-4gpu", "nvidia-smi-topo-m.txt"))
    assert t.links == (("X", "PIX", "SYS", "SYS"), ("PIX", "X", "SYS", "SYS"),
                       ("SYS", "SYS", "X", "PXB"), ("SYS", "SYS", "PXB", "X"))
    assert t.numa_affinity == {0: 0, 1: 0, 2: 1, 3: 1}
    assert t.cpu_affinity[3] == tuple(range(24, 48)) + tuple(range(72, 96))
    assert not all_nvlink(t.links)


def test_single_gpu():
    t = parse_topo(read("nvidia-smi", "single-gpu-topo-m.txt"))
    assert (t.gpus, t.links, t.numa_affinity) == ((0,), (("X",),), {0: 0})
    assert t.cpu_affinity[0] == tuple(range(16))
    assert not all_nvlink(t.links)


def test_query_with_header_units_and_na_memory():
    gpus = parse_query(read("nvidia-smi", "header-na-query-gpu.csv"))
    assert [(g.index, g.name, g.memory_bytes) for g in gpus] == [
        (0, "GRID A100D-40C", 0), (1, "NVIDIA L4", 23034 * MIB)]


def test_query_name_with_comma():
    (gpu,) = parse_query("0, Tesla V100-SXM2-16GB, rev B, 16160\n")
    assert gpu.name == "Tesla V100-SXM2-16GB, rev B" and gpu.memory_bytes == 16160 * MIB


@pytest.mark.parametrize("code, kind", [("X", "self"), ("NV18", "nvlink"), ("NV4", "nvlink"),
                                        ("PIX", "pcie"), ("PXB", "pcie"), ("PHB", "pcie"),
                                        ("NODE", "pcie"), ("SYS", "pcie"), ("NVX", None)])
def test_link_kind(code, kind):
    assert link_kind(code) == kind


@pytest.mark.parametrize("text, needle", [
    ("", "no header"),
    ("\tGPU0\tGPU1\n", "no GPU rows"),
    ("\tGPU0\tGPU1\nGPU0\t X \n", "expected at least 2"),
    ("\tGPU0\tGPU1\nGPU0\t X \tQPI\nGPU1\tQPI\t X \n", "unknown link code 'QPI'"),
])
def test_garbled_topo(text, needle):
    with pytest.raises(ProbeError, match=needle):
        parse_topo(text, where="/cap/nvidia-smi-topo-m.txt")


def test_garbled_query_names_source():
    with pytest.raises(ProbeError, match="/cap/q.csv"):
        parse_query("No devices were found\n", where="/cap/q.csv")


def test_numa_node_from_cpu_affinity_when_column_missing():
    old = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tPHB\t0-7\nGPU1\tPHB\t X \t8-15\n"
    topo = parse_topo(old)
    assert topo.numa_affinity == {0: None, 1: None}
    gpus = parse_query("0, Tesla P100-PCIE-16GB, 16280\n1, Tesla P100-PCIE-16GB, 16280\n")
    merged, _ = merge(gpus, topo, {0: tuple(range(8)), 1: tuple(range(8, 16)), 2: ()})
    assert [g.numa_node for g in merged] == [0, 1]
    merged, _ = merge(gpus, topo, {0: tuple(range(16))})
    assert [g.numa_node for g in merged] == [0, 0]
