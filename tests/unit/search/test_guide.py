"""The hardware's first guess and the coordinate descent around the leader (autotune/search/guide.py),
on captured machines and the real space code, and wired into the search loop."""
from __future__ import annotations

import dataclasses

import pytest

from autotune.config import Config
from autotune.plan.feasible import ruled_out
from autotune.plan.placement import canonical
from autotune.probe import probe
from autotune.probe.topology import Capabilities
from autotune.search.guide import Descent, first_guess, moves, params_of, preference
from autotune.search.loop import run_search
from autotune.search.options import SearchOptions
from autotune.space.resolve import find_space, load_space, parse_space, resolve
from autotune.study.records import Role, records
from paths import MACHINES
from test_search import Sim, new_study
from two_core import space, topo  # noqa: F401 - fixtures: a 2-core machine and its space


def _machine(name: str, ccl: bool = False):
    t = probe(str(MACHINES / name), collect_capabilities=False)
    caps = Capabilities(allocators={"jemalloc": "/lib/libjemalloc.so.2",
                                    "tcmalloc": "/lib/libtcmalloc.so.4"},
                        omp_runtimes={"libgomp": None, "libiomp5": "/lib/libiomp5.so"},
                        backends=("gloo", "ccl") if ccl else ("gloo",),
                        numactl=True, numactl_membind=True, taskset=True)
    t = dataclasses.replace(t, capabilities=caps)
    return t, resolve(load_space(find_space("cpu")), t)


def _launchable(space, topology):
    return lambda p: ruled_out(space.to_config(p), space, topology) is None


def test_the_first_guess_on_an_amx_xeon_is_what_its_hardware_says():
    topology, space = _machine("spr-max-hbm-flat", ccl=True)
    g = first_guess(space, topology, _launchable(space, topology))
    assert g["precision"] == "bf16"            # AMX: a native bf16 unit
    assert g["omp_runtime"] == "libiomp5"      # Intel's OpenMP on an Intel CPU
    assert (g["allocator"], g["binding"], g["backend"]) == ("tcmalloc", "numactl", "ccl")
    assert g["ranks_per_numa_node"] == 1 and g["threads"] is None   # one rank filling each node
    assert g["global_batch"] == Config().global_batch          # the math is the default's
    assert g["ipex"] == "off"


def test_the_first_guess_on_amd_keeps_gnu_openmp_and_fills_the_cores_without_auto(topo):
    # a space without `auto` threads: the guess gives its rank every core it may use
    plain = resolve(parse_space("name: p\nknobs:\n  threads: [1, 2]\n  omp_runtime: found_omp_runtimes\n"
                                "  precision: supported_precisions\n  kmp_blocktime: [0, 1, 200]\n",
                                source="p.yaml"), topo)
    g = first_guess(plain, topo)
    assert g["threads"] == 2 and g["omp_runtime"] == "libgomp"
    assert g["precision"] == ("bf16" if topo.isa.bf16 else "fp32")
    assert g["kmp_blocktime"] == Config().kmp_blocktime    # no opinion: the default launch's


def test_a_guess_that_cannot_run_is_repaired_one_knob_away():
    from benchmarks.landscapes.model_machines import synthetic_topology, _caps
    snc3 = dataclasses.replace(
        synthetic_topology(sockets=1, node_cores=[[8, 8, 8]],
                           distances=[[10, 12, 12], [12, 10, 12], [12, 12, 10]], model="snc3"),
        capabilities=_caps(True))
    space = resolve(load_space(find_space("cpu")), snc3)
    launchable = _launchable(space, snc3)
    plain = first_guess(space, snc3)
    assert plain["global_batch"] == 32 and not launchable(plain)   # 3 ranks cannot split 32
    g = first_guess(space, snc3, launchable)
    assert launchable(g) and g == {**plain, "global_batch": 48}     # the batch, nearest first
    assert first_guess(space, snc3, lambda p: False) is None


def test_moves_go_to_neighbouring_values_doubling_first_and_categorical_by_preference(topo):
    assert moves("ranks_per_numa_node", 2, tuple(range(1, 9)), topo) == [4, 1, 3]
    assert moves("global_batch", 128, (32, 48, 64, 96, 128), topo) == [64, 96]
    assert moves("allocator", "default", ("default", "jemalloc", "tcmalloc"), topo) == [
        "tcmalloc", "jemalloc"]
    assert moves("kmp_blocktime", 1, (0, 1, 200), topo) == [0, 200]   # unknown: space order


def test_a_reference_launch_is_read_back_as_knob_values(topo, space):
    ref = Config(nproc=1, threads=None, binding="numactl", allocator="tcmalloc")
    assert params_of(ref, space)["ranks_per_numa_node"] == 1
    # a bound rank's automatic threads are the count the plan gives it
    assert params_of(canonical(ref, topo), space)["threads"] == 2
    assert params_of(Config(global_batch=1000), space) is None       # not a choice of the space


def test_the_descent_changes_one_knob_and_follows_an_ordered_knob_that_pays_off():
    topology, space = _machine("xeon-2s-icx", ccl=True)
    launchable = _launchable(space, topology)
    leader = first_guess(space, topology, launchable)
    seen = [leader]

    def measured(p):
        return p in seen

    d = Descent(topology)
    first = d.propose(space, leader, measured, launchable)
    assert first == {**leader, "global_batch": 128}     # the batch first: a jump to its largest
    seen.append(first)
    # it paid off (the caller's leader is now `first`); nothing lies above it, so the next knob
    nxt = d.propose(space, first, measured, launchable)
    assert {k for k in nxt if nxt[k] != first[k]} <= {"ranks_per_numa_node", "threads"}
    assert launchable(nxt) and not measured(nxt)
    seen.append(nxt)
    # the ranks paid off too (1 -> 2 per node): the line search goes on upwards along them
    after = d.propose(space, nxt, measured, launchable)
    assert after["ranks_per_numa_node"] > nxt["ranks_per_numa_node"]
    assert {k for k in after if after[k] != nxt[k]} <= {"ranks_per_numa_node", "threads"}


def test_a_jump_that_did_not_pay_off_comes_back_by_doubling():
    topology, space = _machine("xeon-2s-icx", ccl=True)
    launchable = _launchable(space, topology)
    leader = first_guess(space, topology, launchable)
    seen = [leader]
    d = Descent(topology)
    jump = d.propose(space, leader, lambda p: p in seen, launchable)
    assert jump["global_batch"] == 128
    seen.append(jump)
    # the leader stays (128 was slower, or rejected on quality): back down the same knob, by
    # doubling the leader's batch, before the other knobs take their turn
    back = d.propose(space, leader, lambda p: p in seen, launchable)
    assert back["global_batch"] == 2 * leader["global_batch"]
    assert {k for k in back if back[k] != leader[k]} <= {"global_batch", "threads"}
    seen.append(back)
    # that did not pay off either: the next knob
    nxt = d.propose(space, leader, lambda p: p in seen, launchable)
    assert nxt["global_batch"] == leader["global_batch"]


def test_the_descent_ends_when_every_neighbour_is_measured_or_cannot_run(topo, space):
    launchable = _launchable(space, topo)
    leader = first_guess(space, topo, launchable)
    d, seen = Descent(topo), [leader]
    while (p := d.propose(space, leader, lambda q: q in seen, launchable)) is not None:
        assert sum(p[k] != leader[k] for k in p) <= 2   # one knob (and threads refitted)
        seen.append(p)
    assert 3 <= len(seen) <= 20


def test_the_search_measures_the_guess_right_after_the_references(tmp_path, topo, space):
    sim = Sim()
    study = new_study(tmp_path)
    run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
               options=SearchOptions(budget_s=10**6, min_trial_s=10, max_trials=8, guide="descent",
                                     patience=100, max_accuracy_drop=0.5))
    recs = records(study)
    search = [r for r in recs if r.role == Role.SEARCH]
    guess = space.to_config(first_guess(space, topo, _launchable(space, topo)))
    assert search[0].config == guess
    # the descent: a jump to batch 128 (beyond: 0.96 points lost on every seed), back to 64
    # (within: 0.32), then two ranks at 64, the best this Sim has within the accuracy rule, by
    # the 6th launch
    assert [r.config.global_batch for r in search[:4]] == [32, 128, 64, 64]
    assert search[1].result.quality == "beyond" and search[3].config.nproc == 2
    best = max((r for r in recs if r.result.quality == "within"), key=lambda r: r.throughput)
    assert best.throughput == pytest.approx(sim.speed(search[3].config))
    assert (best.config.precision, best.config.nproc, best.config.allocator) == (
        "bf16", 2, "tcmalloc") and best.config.binding != "none"


def test_an_unknown_guide_is_refused():
    with pytest.raises(ValueError, match="guide='fast'"):
        SearchOptions(budget_s=60, guide="fast")


def test_a_guess_of_one_rank_keeps_the_default_backend():
    # one NUMA node: the guess is one rank filling it, which talks to no one; oneCCL would only
    # add its worker thread (the same launch as gloo, measured once), and the line would read
    # backend=ccl for a launch that runs gloo
    topology, space = _machine("desktop-8c16t", ccl=True)
    g = first_guess(space, topology, _launchable(space, topology))
    assert g["ranks_per_numa_node"] == 1 and g["backend"] == "gloo"
    # two NUMA nodes: two ranks, and oneCCL where it was built
    topology, space = _machine("xeon-2s-icx", ccl=True)
    assert first_guess(space, topology, _launchable(space, topology))["backend"] == "ccl"


def test_across_hosts_the_guess_spans_every_host_and_the_descent_tries_one_host_early(topo,
                                                                                       space):
    """--hosts adds `nnodes` to the space: the user gave the hosts to be used, so the guess
    spans them all (the references measure one host), and around that leader the descent's
    second knob, after the global batch, is one host against all of them."""
    hosts = space.across(2)
    launchable = _launchable(hosts, topo)
    g = first_guess(hosts, topo, launchable)
    assert g["nnodes"] == 2 and hosts.to_config(g).nproc == 2 * g["ranks_per_numa_node"]
    # one rank per host, but two ranks in all, which talk: the backend the hardware prefers
    assert g["backend"] == preference("backend", hosts.knobs["backend"], topo)[0]
    d, seen, changed = Descent(topo), [g], []
    for _ in range(3):
        p = d.propose(hosts, g, lambda q: q in seen, launchable)
        seen.append(p)
        changed.append({k: v for k, v in p.items() if v != g[k]})
    # the batch's jump, its way back by doubling (search/guide.py), then one host
    assert [list(c) for c in changed[:2]] == [["global_batch"]] * 2
    assert changed[2] == {"nnodes": 1}


def test_a_search_across_hosts_measures_a_spanning_launch_right_after_the_references(
        tmp_path, topo, space):
    sim = Sim()
    study = new_study(tmp_path)
    hosts = space.across(2)
    run_search(study, space=hosts, topology=topo, evaluate=sim, clock=sim,
               options=SearchOptions(budget_s=10**6, min_trial_s=10, max_trials=3,
                                     guide="descent", patience=100))
    search = [r for r in records(study) if r.role == Role.SEARCH]
    assert search[0].config.nnodes == 2
