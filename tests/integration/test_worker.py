"""Real worker processes, launched without the runner: the worker protocol end to end."""
from paths import REPO
import json
import os
import subprocess
import sys
import time

import pytest

from autotune.run.runner import free_port
from autotune.plan.launch_plan import (EXIT_BACKEND_UNAVAILABLE, EXIT_BAD_CONFIG, EXIT_WORKLOAD_ERROR,
                                 RankExpect, WorkerRequest)

ROOT = REPO
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4"
IOMP5 = os.path.join(sys.prefix, "lib", "libiomp5.so")
JEMALLOC_CONF = ("oversize_threshold:1,background_thread:true,metadata_thp:auto,"
                 "dirty_decay_ms:-1,muzzy_decay_ms:-1")
# Small timed windows: these tests check the protocol, the benchmark checks the numbers.
FAST = dict(warmup_steps=2, target_seconds=1.0, min_steps=5)


def launch(tmp_path, request, *, env=None, rank_env=None, prefix=None, timeout=60.0):
    """Spawn every rank as the runner would; kill them all on timeout. -> (codes, results, logs)"""
    req_path = tmp_path / "request.json"
    req_path.write_text(json.dumps(request.to_json()))
    world = len(request.ranks)
    base = {**os.environ, "PYTHONPATH": str(ROOT), "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(world), **(env or {})}
    procs = []
    for r in range(world):
        renv = {**base, "RANK": str(r), "LOCAL_RANK": str(r),
                "AUTOTUNE_RESULT": str(tmp_path / f"rank{r}.json"), **((rank_env or {}).get(r, {}))}
        argv = [*(prefix(r) if prefix else []), sys.executable, "-m", "autotune.worker",
                "--request", str(req_path)]
        with open(tmp_path / f"rank{r}.log", "w") as log:
            procs.append(subprocess.Popen(argv, env=renv, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True, cwd=ROOT))
    deadline = time.monotonic() + timeout
    codes = []
    try:
        for p in procs:
            try:
                codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(None)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
    logs = [(tmp_path / f"rank{r}.log").read_text() for r in range(world)]
    results = [json.loads((tmp_path / f"rank{r}.json").read_text())
               if (tmp_path / f"rank{r}.json").exists() else None for r in range(world)]
    assert not list(tmp_path.glob("*.tmp.*")), "result written non-atomically"
    return codes, results, logs


def _request(nproc=1, *, threads=1, precision="fp32", allocator="default", omp="libgomp",
             cpus=None, workload="mlp", expect=None, config=None, **kw):
    cfg = {"nproc": nproc, "threads": threads, "global_batch": 32 * nproc, "backend": "gloo",
           "precision": precision, "allocator": allocator, "omp_runtime": omp, **(config or {})}
    ranks = tuple(RankExpect(**{**dict(cpus=cpus(r) if cpus else None, threads=threads,
                                       allocator=allocator, omp_runtime=omp, precision=precision),
                                **(expect or {})}) for r in range(nproc))
    return WorkerRequest(workload=workload, config=cfg, ranks=ranks, **{**FAST, **kw})


def _check_ok(codes, results, logs, request):
    assert codes == [0] * len(request.ranks), logs
    world = len(request.ranks)
    for r, res in enumerate(results):
        assert res["status"] == "ok" and res["rank"] == r and res["world_size"] == world
        assert res["bad_config"] is None
        assert res["throughput"] > 0 and res["timed_steps"] >= request.min_steps
        assert len(res["step_times"]) == res["timed_steps"] == results[0]["timed_steps"]
        assert res["samples"] == 32 * world * res["timed_steps"]
        assert (res["started_at"] <= res["first_step_at"] <= res["timed_start_at"]
                < res["timed_end_at"])
        assert res["peak_rss_bytes"] > 50 * 2**20
        exp = request.ranks[r]
        inf = res["in_force"]
        assert inf["num_threads"] == exp.threads and inf["autocast_dtype"] == exp.precision
        assert (inf["allocator"], inf["omp_runtime"]) == (exp.allocator, exp.omp_runtime)
        if exp.cpus is not None:
            assert inf["affinity"] == list(exp.cpus)
        assert f"[autotune worker rank {r}] window" in logs[r]
    return results


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_one_rank_cnn(tmp_path, precision):
    req = _request(1, threads=2, precision=precision, workload="cnn",
                   config={"channels_last": True})
    results = _check_ok(*launch(tmp_path, req, env={"OMP_NUM_THREADS": "2"}), req)
    assert results[0]["channels_last_applied"] is True
    assert results[0]["final_loss"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_two_ranks_bound_with_taskset(tmp_path, precision):
    req = _request(2, precision=precision, cpus=lambda r: (r,))
    _check_ok(*launch(tmp_path, req, env={"OMP_NUM_THREADS": "1"},
                      prefix=lambda r: ["taskset", "-c", str(r)]), req)


@pytest.mark.slow
@pytest.mark.parametrize("allocator,preload,conf,omp", [
    ("jemalloc", JEMALLOC, JEMALLOC_CONF, "libgomp"),
    ("tcmalloc", TCMALLOC, "", "libiomp5"),
])
def test_allocator_and_openmp_in_force(tmp_path, allocator, preload, conf, omp):
    libs = [preload] + ([IOMP5] if omp == "libiomp5" else [])
    env = {"LD_PRELOAD": ":".join(libs), "MALLOC_CONF": conf, "OMP_NUM_THREADS": "1"}
    # numactl --membind sets a memory policy; Mems_allowed_list would not show it
    req = _request(1, allocator=allocator, omp=omp, expect={"mem_node": 0})
    results = _check_ok(*launch(tmp_path, req, env=env,
                                prefix=lambda r: ["numactl", "--membind=0"]), req)
    assert results[0]["in_force"]["mem_policy"] == "bind:0"


@pytest.mark.slow
def test_a_memory_policy_is_confirmed_in_force_or_the_trial_is_bad_config(tmp_path):
    """mem_policy (issue 37): the rank reads its task policy from numa_maps. Under numactl
    --interleave it trains; started without numactl it refuses to measure local memory as if
    it were interleaved (node 0 is this machine's only node: enough to see the policy)."""
    req = _request(1, config={"mem_policy": "interleave"}, expect={"mem_policy": "interleave:0"})
    for sub in ("applied", "not"):
        (tmp_path / sub).mkdir(mode=0o700)   # a trial folder is 0700 (worker/main.py)
    results = _check_ok(*launch(tmp_path / "applied", req, env={"OMP_NUM_THREADS": "1"},
                                prefix=lambda r: ["numactl", "--interleave=0"]), req)
    assert results[0]["in_force"]["mem_policy"] == "interleave:0"
    codes, results, logs = launch(tmp_path / "not", req, env={"OMP_NUM_THREADS": "1"})
    assert codes == [EXIT_BAD_CONFIG], logs
    assert results[0]["bad_config"] == "mem_policy: planned interleave:0, in force policy default"


@pytest.mark.slow
def test_threads_mismatch_is_bad_config(tmp_path):
    req = _request(1, threads=1, expect={"threads": 2})
    codes, results, logs = launch(tmp_path, req)
    assert codes == [EXIT_BAD_CONFIG], logs
    assert results[0]["status"] == "bad_config"
    assert results[0]["bad_config"] == "threads: planned 2, in force 1"
    assert "threads: planned 2, in force 1" in logs[0]


@pytest.mark.slow
def test_one_rank_mismatch_stops_both_ranks(tmp_path):
    # Rank 1 was planned jemalloc but nothing preloaded it: both ranks must stop, neither may hang.
    req = _request(2)
    req = WorkerRequest(**{**req.__dict__, "ranks": (req.ranks[0], RankExpect(
        **{**req.ranks[1].__dict__, "allocator": "jemalloc"}))})
    codes, results, logs = launch(tmp_path, req, timeout=40)
    assert codes == [EXIT_BAD_CONFIG, EXIT_BAD_CONFIG], logs
    # Both ranks name the real cause, so whichever result the runner reads explains the failure.
    reason = "rank 1: allocator: planned jemalloc, in force default"
    assert [r["bad_config"] for r in results] == [reason, reason]


@pytest.mark.slow
def test_unavailable_backend_exits_79(tmp_path):
    req = _request(1, config={"backend": "nccl"})
    codes, results, logs = launch(tmp_path, req)
    assert codes == [EXIT_BACKEND_UNAVAILABLE], logs
    assert results[0]["status"] == "unavailable" and "nccl" in results[0]["reason"]


@pytest.mark.slow
def test_ccl_without_bindings_exits_79_and_says_why(tmp_path):
    # A machine where ccl was never built (an empty build cache) and Intel's bindings are absent:
    # an unavailable trial naming the reason and the fix, never a crash or a hang.
    req = _request(1, config={"backend": "ccl"})
    codes, results, logs = launch(tmp_path, req, env={"AUTOTUNE_CACHE": str(tmp_path / "empty")})
    assert codes == [EXIT_BACKEND_UNAVAILABLE], logs
    assert results[0]["status"] == "unavailable"
    assert "not built for this torch" in results[0]["reason"]
    assert "python -m autotune.comm.ccl build" in results[0]["reason"]


@pytest.mark.slow
def test_broken_workload_exits_80(tmp_path):
    req = _request(1, workload="no_such_pkg_xyz.train:build")
    codes, results, logs = launch(tmp_path, req)
    assert codes == [EXIT_WORKLOAD_ERROR], logs
    assert results[0]["status"] == "workload_error"
    assert "cannot import no_such_pkg_xyz.train: ModuleNotFoundError" in results[0]["reason"]


@pytest.mark.slow
def test_accuracy_mode_cnn_learns(tmp_path):
    req = _request(2, workload="cnn", mode="accuracy", accuracy_samples=3072,
                   workload_args={"width": 8})
    codes, results, logs = launch(tmp_path, req, env={"OMP_NUM_THREADS": "1"}, timeout=90)
    assert codes == [0, 0], logs
    acc = [r["accuracy"] for r in results]
    assert acc[0] == acc[1]                       # all-reduced: one number for the trial
    assert acc[0] > 0.3, f"held-out accuracy {acc[0]:.3f}, chance is 0.10"
    assert results[0]["timed_steps"] == 3072 // 64


@pytest.mark.slow
def test_user_entry_point_with_eval_fn(tmp_path):
    # A user's module:function spec: the worker owns DDP, timing and the all-reduce of its metric.
    (tmp_path / "my_train.py").write_text(
        "import torch\n"
        "from autotune.worker.workloads import get_workload\n"
        "def build(hidden=16):\n"
        "    base = get_workload('mlp', {'features': 32, 'hidden': hidden})\n"
        "    return {'build_model': base.build_model, 'make_batch': base.make_batch,\n"
        "            'eval_fn': lambda model: 0.75 if torch.distributed.get_rank() else 0.25}\n")
    req = _request(2, workload="my_train:build", mode="accuracy", accuracy_samples=640,
                   workload_args={"hidden": 8})
    codes, results, logs = launch(tmp_path, req, env={"OMP_NUM_THREADS": "1",
                                                      "PYTHONPATH": f"{ROOT}:{tmp_path}"})
    assert codes == [0, 0], logs
    assert [r["accuracy"] for r in results] == [0.5, 0.5]
    assert results[0]["workload"] == "my_train:build" and results[0]["timed_steps"] == 10


@pytest.mark.parametrize("leader,stops", [(1e9, True), (1.0, False)])
def test_a_speed_run_clearly_below_the_leader_ends_its_window_early(tmp_path, leader, stops):
    # Two ranks: rank 0 decides, and both must stop after the same step (a DDP step apart, they
    # would wait for ever in each other's collectives).
    req = _request(2, cpus=lambda r: (r,), target_seconds=3.0, leader_throughput=leader)
    codes, results, logs = launch(tmp_path, req, env={"OMP_NUM_THREADS": "1"},
                                  prefix=lambda r: ["taskset", "-c", str(r)])
    _check_ok(codes, results, logs, req)
    r0 = results[0]
    if stops:
        # about a tenth of the window per judged window, two of them at least
        assert r0["stopped_early"].startswith("stopped early after 2 windows")
        assert "below 95% of the leader's 1000000000.0/s" in r0["stopped_early"]
        assert r0["window_seconds"] < 0.6 * req.target_seconds
        assert "stopped early" in logs[0]
    else:
        assert r0.get("stopped_early") is None
        assert r0["window_seconds"] >= req.target_seconds
    assert results[1]["timed_steps"] == r0["timed_steps"]
