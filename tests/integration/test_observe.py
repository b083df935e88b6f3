"""measure/observe.py: the outside-the-process view of a rank, and its comparison with the plan."""
from __future__ import annotations

from paths import TESTS
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.measure.observe import (RankObservation, Sampler, Window, busy_count, observe, summarize)
from autotune.measure.unacted import Unacted, compare, overridden_knobs, unacted_knobs
from autotune.probe import probe
from autotune.probe.procfs import classify_libraries, mapped_libraries
from autotune.plan.launch_plan import LaunchPlan, RankExpect, WorkerRequest

SPINNER = str(TESTS / "observed_spinner.py")
MAPS = ("7f1 r-xp 0 08:01 1 /venv/lib/python3.11/site-packages/torch/lib/libgomp.so.1\n"
        "7f2 r-xp 0 08:01 2 /usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n"
        "7f3 r-xp 0 08:01 3 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f5 rw-p 0 00:00 0\n")


def expect(**kw) -> RankExpect:
    base = dict(cpus=None, threads=1, allocator="default", omp_runtime="libgomp", precision="fp32")
    return RankExpect(**{**base, **kw})


def seen(rank: int = 0, **kw) -> RankObservation:
    base = dict(rank=rank, pid=100 + rank, busy_threads=1, num_threads=3, affinity=(0, 1),
                libraries=("libgomp.so.1",), mempolicy="default", num_windows=4)
    return RankObservation(**{**base, **kw})


def test_mapped_libraries_keeps_allocator_and_openmp_only():
    assert mapped_libraries(MAPS) == ("libgomp.so.1", "libjemalloc.so.2")
    assert classify_libraries(mapped_libraries(MAPS)) == ("jemalloc", "libgomp")
    assert classify_libraries(("libiomp5.so", "libgomp.so.1")) == ("default", "libiomp5")
    assert classify_libraries(()) == ("default", "none")


def test_busy_count_is_relative_to_the_busiest_thread():
    # Two OpenMP threads sharing the work, gloo's thread and an idle one.
    assert busy_count({1: 0.20, 2: 0.18, 3: 0.01, 4: 0.0}, 0.25) == 2
    # Oversubscribed: each thread gets a fraction of a core, all are still the pool.
    assert busy_count({1: 0.03, 2: 0.03, 3: 0.03, 4: 0.03}, 0.25) == 4
    # Nothing above the floor: a process waiting on I/O computes nothing.
    assert busy_count({1: 0.001, 2: 0.001}, 0.25) == 0
    assert busy_count({}, 0.25) == 0


def test_summarize_needs_two_windows_for_a_thread_count():
    one_spike = [Window(seconds=0.25, threads={7: {1: 0.2}}),
                 Window(seconds=0.25, threads={7: {1: 0.2, 2: 0.2}}),
                 Window(seconds=0.25, threads={7: {1: 0.2}})]
    assert summarize(one_spike) == (1, 1, 3)
    pool = [Window(seconds=0.25, threads={7: {1: 0.1, 2: 0.1, 3: 0.1}})] * 2
    assert summarize(pool) == (3, 1, 2)
    # Two worker processes (mp.spawn) busy in the same rank tree.
    spawned = [Window(seconds=0.25, threads={7: {1: 0.0}, 8: {1: 0.2}, 9: {1: 0.2}})] * 2
    assert summarize(spawned) == (1, 2, 2)
    assert summarize([]) == (0, 0, 0)
    assert summarize([Window(seconds=0.25, threads={7: {1: 0.2, 2: 0.2}})]) == (2, 1, 1)


def test_compare_names_each_knob_that_did_not_act():
    exp = [expect(threads=1, cpus=(0,)), expect(threads=1, cpus=(1,))]
    obs = [seen(0, busy_threads=8, affinity=(0,)), seen(1, busy_threads=1, affinity=(0, 1))]
    found = compare(exp, obs)
    assert found == (
        Unacted(knob="threads", rank=0, message="threads=1 planned; rank 0 ran 8 busy threads: "
                                                "the script sets its own thread count"),
        Unacted(knob="binding", rank=1, message="cpus 1 planned; rank 1 ran on cpus 0-1: "
                                                "the script sets its own CPU affinity"))
    assert overridden_knobs(found) == ("threads", "binding")
    assert unacted_knobs(exp, obs) == [u.message for u in found]
    plan = LaunchPlan(ranks=(), request_path="r.json", timeout_s=1.0,
                      request=WorkerRequest(workload="cnn", config={}, ranks=tuple(exp)))
    assert compare(plan, obs) == found          # a LaunchPlan holds the same expectations


def test_compare_libraries_and_memory_policy():
    exp = [expect(allocator="jemalloc", omp_runtime="libiomp5", mem_node=0)]
    obs = [seen(libraries=("libgomp.so.1",), mempolicy="default")]
    assert overridden_knobs(compare(exp, obs)) == ("allocator", "omp_runtime", "binding")
    assert compare(exp, [seen(libraries=("libgomp.so.1", "libiomp5.so", "libjemalloc.so.2"),
                              mempolicy="bind:0")]) == ()


def test_compare_gives_the_benefit_of_the_doubt():
    # Fewer busy threads than planned: the model may be too small to split; not an override.
    assert compare([expect(threads=4)], [seen(busy_threads=1)]) == ()
    # Nothing planned for threads (torch's default) or affinity (unbound): nothing to judge.
    assert compare([expect(threads=None)], [seen(busy_threads=8)]) == ()
    # The process ended before a sample: no libraries seen, no policy readable.
    assert compare([expect(allocator="jemalloc", mem_node=0)],
                   [seen(libraries=(), mempolicy=None)]) == ()


def test_observation_is_validated():
    with pytest.raises(ValueError, match="busy_threads=-1"):
        seen(busy_threads=-1)
    with pytest.raises(ValueError, match="interval_s"):
        Sampler([1], interval_s=0)


@pytest.mark.slow
def test_sampler_sees_a_thread_count_set_inside_the_script():
    """A real process that sets OMP_NUM_THREADS itself: 1 busy thread vs as many as torch allows."""
    cpus = len(os.sched_getaffinity(0))
    if cpus < 2:
        pytest.skip("needs 2 CPUs to tell 1 thread from several")
    results = {}
    for threads in ("1", str(cpus)):
        proc = subprocess.Popen([sys.executable, SPINNER, threads, "3"])
        with Sampler([proc.pid], interval_s=0.2) as sampler:
            proc.wait(timeout=60)
        (obs,) = sampler.observations()
        results[threads] = obs
        assert obs.pid == proc.pid and obs.num_windows >= 2
        assert obs.affinity == tuple(sorted(os.sched_getaffinity(0)))
        assert obs.omp_runtime == "libgomp"
    assert results["1"].busy_threads == 1
    assert results[str(cpus)].busy_threads >= 2
    assert unacted_knobs([expect(threads=1)], [results[str(cpus)]]) == [
        f"threads=1 planned; rank 0 ran {results[str(cpus)].busy_threads} busy threads: "
        "the script sets its own thread count"]


@pytest.mark.slow
def test_a_rank_whose_openmp_pins_each_thread_to_one_core_is_seen_on_all_of_them():
    """Intel OpenMP with KMP_AFFINITY=compact pins every OpenMP thread, the main one included, to
    one core of the rank's set. `autotune launch` with libiomp5 warned "cpus 0-1 planned; rank 0
    ran on cpus 0: the script sets its own CPU affinity" for a script that set nothing."""
    cpus = tuple(sorted(os.sched_getaffinity(0)))
    iomp = probe().capabilities.omp_runtimes.get("libiomp5")
    if len(cpus) < 2 or iomp is None:
        pytest.skip("needs 2 CPUs and libiomp5 (intel-openmp, installed by setup.sh)")
    env = {**os.environ, "LD_PRELOAD": iomp, "KMP_AFFINITY": "granularity=fine,compact,1,0",
           "OMP_NUM_THREADS": str(len(cpus))}
    proc = subprocess.Popen([sys.executable, SPINNER, str(len(cpus)), "3"], env=env)
    with Sampler([proc.pid], interval_s=0.2) as sampler:
        proc.wait(timeout=60)
    (obs,) = sampler.observations()
    assert obs.omp_runtime == "libiomp5" and obs.busy_threads >= 2
    assert obs.affinity == cpus
    plan = expect(cpus=cpus, threads=len(cpus), omp_runtime="libiomp5")
    assert [u.knob for u in compare([plan], [obs])] == []


@pytest.mark.slow
def test_observe_blocks_and_survives_a_process_that_ends():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    (obs,) = observe([proc.pid], seconds=0.8, interval_s=0.1)
    proc.wait()
    # Python's start-up is one busy thread at most; no OpenMP or allocator library is loaded.
    assert obs.rank == 0 and obs.pid == proc.pid
    assert obs.busy_threads <= 1 and obs.libraries == () and obs.omp_runtime == "none"
