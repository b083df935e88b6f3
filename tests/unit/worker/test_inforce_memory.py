"""The in-force check confirms a memory policy from /proc/<pid>/numa_maps: literal text of each
policy the kernel prints (real processes under numactl: tests/integration/test_memory_placement.py)."""
from __future__ import annotations

import pytest

from autotune.probe.procfs import memory_placed, parse_mem_policy

EXE = " file=/usr/bin/python3.11 mapped=1 N0=1 kernelpagesize_kB=4\n7f2 default anon=1\n"


@pytest.mark.parametrize("line, spec, placed", [
    ("55e8 interleave:0,4", "interleave:0,4", True),
    ("55e8 interleave=static:0,4", "interleave:0,4", True),
    ("55e8 interleave:0-1", "interleave:0,1", True),
    ("55e8 prefer:5", "preferred:5", True),
    ("55e8 weighted interleave:0,2", "weighted:0,2", True),
    ("55e8 default", "interleave:0,4", False),              # numactl did not apply
    ("55e8 interleave:0", "interleave:0,4", False),          # other nodes
    ("55e8 prefer:4", "interleave:4", False),                # another mode
    ("55e8 bind:0", "preferred:0", False),
])
def test_memory_placed_reads_the_kernels_policy_text(line, spec, placed):
    assert memory_placed(spec, parse_mem_policy(line + EXE)) is placed


def test_the_two_word_weighted_mode_is_read_whole():
    assert parse_mem_policy("55e8 weighted interleave:0,2" + EXE) == "weighted interleave:0,2"
