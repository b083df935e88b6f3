"""The landscape model of large machines (benchmarks/landscapes/model.py): each mechanism with
literal numbers, the machines it builds, its fit on the recorded landscape and the search on it."""
from __future__ import annotations

import dataclasses
import json

import pytest

from autotune.config import Config
from autotune.space.resolve import find_space, load_space, resolve, topology_names
from benchmarks.landscapes import model as LM
from benchmarks.landscapes import model_machines as MM
from benchmarks.replay import at_scale

# A 1-socket, 4-core SMT-2 machine with one node: every number below is worked out by hand.
FOUR = MM.synthetic_topology(sockets=1, node_cores=[[4]], distances=[[10]], model="four")
TWO_NODES = MM.synthetic_topology(sockets=2, node_cores=[[2], [2]], distances=[[10, 20], [20, 10]],
                                  model="two nodes")
HW = LM.Hardware(name="t", node_bandwidth_gbs=100.0)
PLAIN = LM.Params(sample_s=1e-3, fixed_s=1e-3, serial=0.0, numactl=1.0, taskset=1.0,
                  allocator=(("default", 1.0), ("tcmalloc", 1.25)), smt_gain=0.1,
                  memory_stall=0.25, overlap=0.5, gloo_alpha_s=1e-5, gloo_beta_bps=1e9,
                  grad_bytes=1e6)


def test_ring_allreduce_is_the_alpha_beta_formula():
    assert LM.allreduce_s("gloo", 1, 1e6, PLAIN) == 0.0
    # 2(p-1) alpha + 2(p-1)/p G/beta = 6e-5 + 1.5e-3
    assert LM.allreduce_s("gloo", 4, 1e6, PLAIN) == pytest.approx(1.56e-3)
    ccl = dataclasses.replace(PLAIN, ccl_alpha_s=1e-6, ccl_beta_bps=1e10)
    assert LM.allreduce_s("ccl", 4, 1e6, ccl) == pytest.approx(6e-6 + 1.5e-4)


def test_amdahl_and_accuracy_rules():
    assert LM.amdahl(4, 0.1) == pytest.approx(0.325)
    assert LM.amdahl(1, 0.3) == pytest.approx(1.0)
    assert LM.accuracy(512, "fp32") == pytest.approx(0.90)     # up to the critical batch: no loss
    assert LM.accuracy(2048, "fp32") == pytest.approx(0.88)    # 1 pp per doubling beyond it
    assert LM.accuracy(256, "bf16") == pytest.approx(0.898)


def test_one_bound_rank_costs_compute_plus_fixed_time():
    c = Config(nproc=1, ranks_per_numa_node=1, threads=4, binding="numactl", global_batch=32)
    # compute 32 x 1 ms / 4 cores = 8 ms; memory 32 x 3.28 MB / 100 GB/s = 1.05 ms (hidden)
    assert LM.step_seconds(c, FOUR, HW, PLAIN) == pytest.approx(0.009)
    assert LM.throughput(c, FOUR, HW, PLAIN) == pytest.approx(32 / 0.009)
    assert LM.throughput(c.with_(allocator="tcmalloc"), FOUR, HW, PLAIN) == pytest.approx(32 / 0.0074)


def test_smt_siblings_add_the_sibling_gain_only():
    # 8 threads on the 4 cores' 8 logical CPUs: 4 x 1.1 effective cores, not 8
    c = Config(nproc=1, ranks_per_numa_node=1, threads=8, binding="numactl_smt", global_batch=32)
    assert LM.step_seconds(c, FOUR, HW, PLAIN) == pytest.approx(0.032 / 4.4 + 0.001)


def test_ranks_pay_the_exposed_allreduce_and_share_node_bandwidth():
    c = Config(nproc=4, ranks_per_numa_node=4, threads=1, binding="taskset", global_batch=128)
    compute = 0.032                                   # one core per rank
    exposed = (6e-5 + 1.5e-3) * 0.5                   # half hidden behind backward
    assert LM.step_seconds(c, FOUR, HW, PLAIN) == pytest.approx(compute + 0.001 + exposed)
    slow_memory = dataclasses.replace(HW, node_bandwidth_gbs=10.0)
    # 4 ranks x 32 samples x 3.28 MB over 10 GB/s = 41.9 ms > 32 ms of compute: memory-bound
    assert LM.step_seconds(c, FOUR, slow_memory, PLAIN) == pytest.approx(
        4 * 32 * LM.BYTES_PER_SAMPLE / 1e10 + 0.001 + exposed)


def test_an_unbound_rank_pays_remote_memory_from_the_distance_matrix():
    bound = Config(nproc=2, ranks_per_numa_node=1, threads=2, binding="numactl", global_batch=64)
    unbound = bound.with_(binding="none")
    # distances 10/20: half the accesses remote at 2x latency -> mean 1.5; 25% of time stalls
    fb, fu = LM.step_seconds(bound, TWO_NODES, HW, PLAIN), LM.step_seconds(unbound, TWO_NODES, HW, PLAIN)
    exposed = LM.allreduce_s("gloo", 2, 1e6, PLAIN) * 0.5
    assert fb == pytest.approx(0.016 + 0.001 + exposed)
    assert fu == pytest.approx(0.016 * 1.125 + 0.001 + exposed)


def test_trial_time_grows_with_ranks():
    p = LM.Params()
    one = Config()
    assert LM.trial_seconds(one, 3200.0, p) == pytest.approx(2.7 + 3 * 0.01 + 5.0 + 0.5)
    many = Config(nproc=100, ranks_per_numa_node=50, threads=1, global_batch=3200)
    start = 2.7 + 0.03 * 99 + 2e-4 * 100 * 99 / 2
    assert LM.trial_seconds(many, 3200.0, p) == pytest.approx(start + 3 * 1.0 + 5.5)


def test_simulated_machines_resolve_the_real_space():
    ms = MM.machines()
    assert set(ms) >= {"xeon-2s-icx", "epyc-7763-nps4", "spr-max-hbm-flat", "gnr-snc3", "xeon-2x56"}
    snc3, _ = ms["gnr-snc3"]
    names = topology_names(snc3)
    assert (names["usable_cores"], names["cores_per_node"], names["numa_nodes"], names["smt"]) == (
        128, 42, 3, 2)
    space = resolve(load_space(find_space("cpu")), snc3)
    # a node's divisors and auto reach 42 or 43 cores a rank on uneven nodes
    assert space.knobs["threads"] == (1, 2, 4, 8, 16, 32, 64, 128, 3, 6, 7, 14, 21, 42, None)
    # 3 nodes cannot split 32 or 64 rank by rank: splittable() adds 48 and 96
    assert space.knobs["global_batch"] == (32, 48, 64, 96, 128)
    assert space.knobs["backend"] == ("gloo", "ccl")
    epyc, _ = ms["epyc-7763-nps4"]   # 4 nodes split 32 evenly: nothing added
    assert resolve(load_space(find_space("cpu")), epyc).knobs["global_batch"] == (32, 64, 128)


def test_fit_on_the_recorded_landscape_and_the_books_shape():
    rep = at_scale.calibration_report()
    assert rep["fit"]["configs"] == 326   # the Zen 5 machine's launched configurations
    assert rep["fit"]["r2_log"] > 0.8 and rep["fit"]["median_abs_pct_error"] < 12
    gloo = rep["published_shapes"]["cnn_78k_params"]["gloo"]
    assert 1.15 < gloo["ratio"] < 1.35 and gloo["ranks"] > 1 and gloo["accuracy_drop_pp"] == 0


def test_the_real_search_on_a_modelled_machine(tmp_path, capsys):
    out = tmp_path / "scale.json"
    assert at_scale.main(["--machines", "epyc-7763-nps4", "--seeds", "1",
                                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    # cpu.yaml on NPS4: 11520 combinations, 1740 launchable: a layout is launchable at a global
    # batch its ranks can split (64 ranks cannot split 32 but can split 64 and 128); mem_policy
    # doubles the grid (local, interleave), and interleave launches only unbound ranks, which
    # span the 4 nodes (348 more launchable)
    assert "| epyc-7763-nps4 | 23040 (2088) |" in text
    row = json.loads(out.read_text())["rows"][0]
    assert row["space_size"] == 23040 and row["oracle_in_space"] is True  # auto reaches it
    assert row["trials_95"]["autotune"] <= row["launchable"]
    assert 0.0 <= row["success_30min"] <= 1.0
