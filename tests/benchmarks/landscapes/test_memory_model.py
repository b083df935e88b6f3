"""The landscape model's memory (issue 37): each node's bandwidth and latency, a workload's
memory-bound share, and where each mem_policy puts a rank's pages, with literal numbers on the
two issue-37 captures; the lazy landscape and its grid walk against the stored one."""
from __future__ import annotations

import dataclasses
import json

import pytest

from autotune.config import Config
from autotune.space.resolve import find_space, load_space, resolve
from benchmarks.landscapes import model as LM
from benchmarks.landscapes import model_machines as MM
from benchmarks.replay import memory_placement as MP

MIB = 2 ** 20
# compute-free: every step is its memory time, plus nothing else
MEMORY_ONLY = LM.Params(sample_s=1e-12, fixed_s=0.0, serial=0.0, numactl=1.0, taskset=1.0,
                        allocator=(("default", 1.0),), memory_stall=0.25, overlap=1.0)


def machine(name: str):
    return MM.machines()[name]


def test_local_is_the_model_as_it_was_and_the_share_scales_the_traffic():
    topo, hw = machine("xeon-max-snc4-flat")
    c = Config(nproc=4, ranks_per_numa_node=1, threads=14, binding="numactl", global_batch=128)
    # 32 samples a rank, each its activation bytes, over its quadrant's 76.8 GB/s of DDR5
    assert LM.step_seconds(c, topo, hw, MEMORY_ONLY) == pytest.approx(
        32 * LM.BYTES_PER_SAMPLE / 76.8e9)
    half = dataclasses.replace(MEMORY_ONLY, memory_share=0.5)
    assert LM.step_seconds(c, topo, hw, half) == pytest.approx(
        0.5 * 32 * LM.BYTES_PER_SAMPLE / 76.8e9)


def test_preferred_fast_streams_from_the_quadrants_hbm():
    topo, hw = machine("xeon-max-snc4-flat")
    c = Config(nproc=4, ranks_per_numa_node=1, threads=14, binding="numactl", global_batch=128,
               mem_policy="preferred_fast")
    # the HBM node's HMAT figure: 390625 MiB/s (409.6 GB/s)
    assert LM.step_seconds(c, topo, hw, MEMORY_ONLY) == pytest.approx(
        32 * LM.BYTES_PER_SAMPLE / (390625 * MIB))
    # its latency (130 ns against 110 ns of DDR5) stalls the compute part: 25% of (130/110 - 1)
    compute = dataclasses.replace(MEMORY_ONLY, sample_s=1e-3, memory_share=1e-9)
    local = LM.step_seconds(c.with_(mem_policy="local"), topo, hw, compute)
    assert LM.step_seconds(c, topo, hw, compute) == pytest.approx(
        local * (1 + 0.25 * (130 / 110 - 1)), rel=1e-6)


def test_interleave_spreads_the_pages_over_ddr_and_hbm():
    topo, hw = machine("xeon-max-snc4-flat")
    c = Config(nproc=4, ranks_per_numa_node=1, threads=14, binding="numactl", global_batch=128,
               mem_policy="interleave")
    half = 16 * LM.BYTES_PER_SAMPLE   # half of a rank's 32 samples' bytes on each node
    assert LM.step_seconds(c, topo, hw, MEMORY_ONLY) == pytest.approx(half / 76.8e9)


def test_weighted_splits_dram_and_cxl_by_bandwidth_and_interleave_waits_on_cxl():
    topo, hw = machine("xeon-2s-cxl")
    c = Config(nproc=2, ranks_per_numa_node=1, threads=52, binding="numactl", global_batch=64,
               mem_policy="weighted")
    bytes_ = 32 * LM.BYTES_PER_SAMPLE
    dram, cxl = 6 / 7 * bytes_ / 307.2e9, 1 / 7 * bytes_ / (48828 * MIB)
    assert LM.step_seconds(c, topo, hw, MEMORY_ONLY) == pytest.approx(max(dram, cxl))
    assert LM.step_seconds(c.with_(mem_policy="interleave"), topo, hw, MEMORY_ONLY) == \
        pytest.approx(0.5 * bytes_ / (48828 * MIB))
    assert LM.step_seconds(c.with_(mem_policy="local"), topo, hw, MEMORY_ONLY) == \
        pytest.approx(bytes_ / 307.2e9)


def test_a_capture_without_hmat_takes_the_hardwares_hbm_figure():
    topo, hw = machine("spr-max-hbm-flat")
    assert LM.node_bandwidth(topo, hw, 2) == pytest.approx(1638.4e9)
    assert LM.node_bandwidth(topo, hw, 0) == pytest.approx(307.2e9)


def test_the_lazy_landscape_and_its_grid_walk_agree_with_the_stored_one():
    topo, hw = machine("epyc-7763-nps4")
    space = resolve(load_space(find_space("cpu")), topo)
    stored = MM.model_landscape("epyc-7763-nps4", topo, hw)
    lazy = MP.model_landscape("epyc-7763-nps4", topo, hw, space, LM.Params())
    walked = MP.stream_oracle(lazy, space)
    best, row = stored.oracle()
    assert walked["oracle"] == pytest.approx(best)
    assert walked["config"].key() == Config.from_dict(row["config"]).key()
    c = Config.from_dict(row["config"])
    assert lazy.row(c, space)["throughput"] == pytest.approx(stored.rows[c.key()]["throughput"])


def test_a_side_by_side_replay_with_and_without_the_knob(tmp_path, capsys):
    out = tmp_path / "mem.json"
    assert MP.main(["--machines", "epyc-7763-nps4", "--seeds", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| epyc-7763-nps4 | local, interleave |" in text and "SIMULATED" in text
    doc = json.loads(out.read_text())
    assert doc["simulated"] is True
    (pair,) = doc["pairs"]
    assert pair["without"]["space_size"] == 11520 and pair["with"]["space_size"] == 23040
    assert pair["without"]["launchable"] == 1740
    assert 0.0 <= pair["with"]["success_30min"] <= 1.0
