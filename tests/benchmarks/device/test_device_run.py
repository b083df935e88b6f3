"""The GPU machine's kit, its pure parts: which layouts the 16-core comparison sets against each
other, from a probe's JSON (the whole kit runs in tests/integration/test_device_kit.py)."""
from __future__ import annotations

import pytest

from autotune.probe import probe
from benchmarks.landscapes import sixteen_cores
from benchmarks.device.run import compare_s, layout_comparison, parse_args
from paths import MACHINES


def probe_json(name: str) -> dict:
    return probe(str(MACHINES / name), collect_capabilities=False).to_json()


def test_one_l3_group_sets_single_thread_ranks_against_one_wide_rank():
    a, b, label = layout_comparison(probe_json("h200-emr-16c"))   # what ran on 2026-11-26
    assert a == {"nproc": 16, "ranks_per_numa_node": 16, "threads": 1}
    assert b == {"nproc": 1, "ranks_per_numa_node": 1, "threads": 16}
    assert "share 1 L3 group" in label


def test_l3_groups_finer_than_nodes_set_a_rank_per_l3_against_a_rank_per_node():
    # NPS4 EPYC: 4 nodes of 16 cores, 8 L3 groups (2 per node)
    a, b, label = layout_comparison(probe_json("epyc-nps4-4gpu"))
    assert a == {"nproc": 8, "ranks_per_numa_node": 2, "threads": 8}
    assert b == {"nproc": 4, "ranks_per_numa_node": 1, "threads": 16}
    assert label.startswith("one rank per L3 group (8 groups)")


def test_phase_times_and_budgets():
    args = parse_args(["--out", "/tmp/x", "--cpu-budget", "5m", "--compare-rounds", "2"])
    assert args.cpu_budget == 300 and args.gpu_budget == 240 and args.deadline == 540
    assert compare_s(args) == 2 * 2 * (5 + 10)     # rounds x (A, B) x (window + launch)
    assert parse_args(["--out", "/tmp/x", "--cpu-budget", "0"]).cpu_budget == 0


def test_sixteen_cores_refuses_a_folder_that_is_not_a_capture(tmp_path, capsys):
    assert sixteen_cores.main([str(tmp_path), "--bandwidth", "100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a /sys capture" in err


def test_what_travels_is_counted_per_part_and_refused_over_the_limit(tmp_path):
    from benchmarks.device.kit import MIB, parts, too_big
    kit = tmp_path / "kit"
    (kit / "wheels").mkdir(parents=True)
    (kit / "wheels" / "a.whl").write_bytes(b"x" * 3 * (1 << 20))
    (kit / "ccl.tar.gz").write_bytes(b"x" * (1 << 20))
    sizes = parts(kit)
    assert list(sizes) == ["ccl.tar.gz", "wheels", "working tree"]
    assert sizes["wheels"] == 3 * MIB and sizes["ccl.tar.gz"] == MIB and sizes["working tree"] > 0
    assert too_big(sizes, 64) is None
    refusal = too_big({"wheels": 60 * MIB, "ccl.tar.gz": 3 * MIB, "working tree": 4 * MIB}, 64)
    assert refusal == ("the kit and the working tree come to 67.0 MiB, over the 64 MiB the device "
                       "carries (wheels 60.0 MiB, ccl.tar.gz 3.0 MiB, working tree 4.0 MiB); "
                       "drop what the runs do not need")
