"""The runner against real processes: every fault the fake trainer can inject, per rank.

Each trial carries a unique AUTOTUNE_TRIAL_ID in its env; after run_plan returns, no process on the
machine may carry it, and nothing may listen on the trial's rendezvous port.
"""
from __future__ import annotations

import contextlib

from paths import REPO, TESTS
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import psutil
import pytest

from autotune.plan.launch_plan import LaunchPlan, RankExpect, RankPlan, WorkerRequest
from autotune.run.runner import (Interrupted, classify, free_port, interrupt_on_sigterm, reap_orphans, root_cause, run_plan)
from autotune.run.rank_output import TAIL_BYTES, clean_tail

FAKE = str(TESTS / "fake_trainer.py")
PEER = ("RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer "
        "[127.0.0.1]:18867. This is typically caused by a remote worker crashing.")


def make_plan(tmp: Path, fault: dict[str, str] | None = None, *, nproc: int = 2,
              timeout_s: float = 20.0, grace_s: float = 2.0, **workload_args) -> LaunchPlan:
    port, trial_id = free_port(), uuid.uuid4().hex
    request = WorkerRequest(
        workload="fake", config={"nproc": nproc, "batch_size": 8},
        ranks=tuple(RankExpect(cpus=None, threads=None, allocator="default",
                               omp_runtime="libgomp", precision="fp32") for _ in range(nproc)),
        workload_args={"fault": fault or {}, **workload_args})
    request_path = str(tmp / "request.json")
    ranks = []
    for r in range(nproc):
        result = str(tmp / f"result.{r}.json")
        env = {**os.environ, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(nproc),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "AUTOTUNE_RESULT": result,
               "AUTOTUNE_TRIAL_ID": trial_id, "OMP_NUM_THREADS": "1"}
        ranks.append(RankPlan(rank=r, argv=(sys.executable, FAKE, "--request", request_path),
                              env=env, cpus=None, mem_node=None,
                              log_path=str(tmp / f"rank{r}.log"), result_path=result))
    return LaunchPlan(ranks=tuple(ranks), request_path=request_path, request=request,
                      timeout_s=timeout_s, grace_s=grace_s, master_port=port,
                      env_delta={"AUTOTUNE_TRIAL_ID": trial_id})


def survivors(plan: LaunchPlan) -> list[str]:
    """Processes carrying the trial's id, plus anything still listening on its port."""
    trial_id = plan.ranks[0].env["AUTOTUNE_TRIAL_ID"]
    found = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and \
                    p.environ().get("AUTOTUNE_TRIAL_ID") == trial_id:
                found.append(f"pid {p.pid}: {' '.join(p.info['cmdline'] or [])}")
        except psutil.Error:
            pass
    found += [f"listener on port {c.laddr.port}" for c in psutil.net_connections("tcp")
              if c.laddr and c.laddr.port == plan.master_port and c.status == psutil.CONN_LISTEN]
    return found


def run(tmp_path: Path, fault: dict[str, str] | None = None, **kw):
    plan = make_plan(tmp_path, fault, **kw)
    res = run_plan(plan)
    assert survivors(plan) == []
    return plan, res


# ---------------------------------------------------------------- classify, with literal inputs

OK0 = {"rank": 0, "samples_per_second": 100.0}
OK1 = {"rank": 1, "samples_per_second": 100.0}


@pytest.mark.parametrize("codes,results,tails,timed_out,kw,expected", [
    ((0, 0), (OK0, OK1), ("", ""), False, {}, ("ok", "")),
    # gloo teardown deadlock: we killed both after their results were written
    ((-15, -9), (OK0, OK1), ("", ""), False, {"signalled": {0, 1}}, ("ok", "")),
    ((1, 3), (None, None), (PEER, "exiting"), False, {"exit_order": [0, 1]},
     ("crash", "rank 1 exited with code 3")),
    ((-15, -11), (None, None), ("", "segfaulting"), False,
     {"exit_order": [1], "signalled": {0}}, ("crash", "rank 1 killed by SIGSEGV")),
    ((-9, 1), (None, None), ("", PEER), False, {"exit_order": [1, 0]},
     ("oom", "rank 0 killed by SIGKILL not sent by autotune (likely the out-of-memory killer)")),
    ((-15, 1), (None, None), ("", "MemoryError"), False, {"exit_order": [1], "signalled": {0}},
     ("oom", "rank 1 exited with code 1; its log reports memory exhaustion")),
    ((1, 1), (None, None), ("", "terminate called after 'std::bad_alloc'"), False,
     {"exit_order": [1, 0]},
     ("oom", "rank 1 exited with code 1; its log reports memory exhaustion")),
    ((-15, -15), (None, None), ("", ""), True, {"signalled": {0, 1}, "timeout_s": 8},
     ("timeout", "exceeded the trial timeout of 8s; no result from rank(s) 0, 1")),
    ((-15, -15), (OK0, None), ("", ""), True, {"signalled": {0, 1}},
     ("timeout", "exceeded the trial timeout; no result from rank(s) 1")),
    ((78, -15), ({"bad_config": ["threads: planned 1, in force 2"]}, None), ("", ""), False,
     {"signalled": {1}}, ("bad_config", "rank 0: threads: planned 1, in force 2")),
    ((0, 0), (OK0, {"outcome": "bad_config", "reason": "cpus differ"}), ("", ""), False, {},
     ("bad_config", "rank 1: cpus differ")),
    ((0, 80), (OK0, {"outcome": "workload_error", "reason": "no metric"}), ("", ""), False, {},
     ("workload_error", "rank 1: no metric (exit 80)")),
    ((0, 0), (OK0, {**OK1, "status": "ok"}), ("", ""), False, {}, ("ok", "")),
    ((-15, 78), (None, None), ("", ""), False, {"signalled": {0}},
     ("bad_config", "rank 1 exited with code 78 (config not in force)")),
    ((1, 79), (None, None), (PEER, ""), False, {},
     ("unavailable", "rank 1: backend unavailable (exit 79)")),
    ((80, -15), (None, None), ("", ""), False, {"signalled": {1}},
     ("workload_error", "rank 0: workload error (exit 80)")),
    ((0, 0), (OK0, None), ("", ""), False, {"exit_order": [0, 1]},
     ("crash", "rank 1 exited 0 without a result")),
    ((0, 0), (OK0, "JSONDecodeError: Expecting value"), ("", ""), False, {},
     ("crash", "rank 1 exited 0 with a malformed result: JSONDecodeError: Expecting value")),
    # both seen in the same poll: the torn-connection victim is not the root cause
    ((1, 3), (None, None), (PEER, "exiting"), False, {"exit_order": [0, 1]},
     ("crash", "rank 1 exited with code 3")),
    # a victim's own OOM-looking words do not make an OOM when the root cause is a segfault
    ((-11, 1), (None, None), ("", PEER + " out of memory"), False, {"exit_order": [1, 0]},
     ("crash", "rank 0 killed by SIGSEGV")),
    # --- results as autotune/worker/main.py writes them: every rank, failures included
    ((1, -11), ({"status": "crash", "reason": PEER}, None), (PEER, ""), False,
     {"exit_order": [0, 1]}, ("crash", "rank 1 killed by SIGSEGV")),
    ((1, 1), ({"status": "crash", "reason": PEER}, {"status": "crash", "reason": "ValueError: x"}),
     ("", ""), False, {"exit_order": [0, 1]},
     ("crash", "rank 1 exited with code 1: ValueError: x")),
    ((1, -15), ({"status": "oom", "reason": "MemoryError: "}, None), ("", ""), False,
     {"exit_order": [0], "signalled": {1}}, ("oom", "rank 0 exited with code 1; MemoryError:")),
    ((79, 79), ({"status": "unavailable", "reason": "backend 'ccl' is not available"},) * 2,
     ("", ""), False, {"exit_order": [1, 0]},
     ("unavailable", "rank 1: backend 'ccl' is not available (exit 79)")),
    ((78, 78), ({"status": "bad_config", "bad_config": "rank 1: threads 2, planned 1"},) * 2,
     ("", ""), False, {}, ("bad_config", "rank 0: rank 1: threads 2, planned 1")),
    ((0, 0), ({**OK0, "status": "ok", "bad_config": None},) * 2, ("", ""), False, {}, ("ok", "")),
    # reported a failure, then had to be killed at the timeout
    ((-15, -15), ({"status": "crash", "reason": "RuntimeError: x"}, None), ("", ""), True,
     {"signalled": {0, 1}}, ("crash", "rank 0: RuntimeError: x")),
])
def test_classify(codes, results, tails, timed_out, kw, expected):
    assert classify(codes, results, tails, timed_out, **kw) == expected


def test_root_cause_prefers_first_exit_then_non_victims():
    assert root_cause((3, 5), (None, None), ("", ""), exit_order=[1, 0]) == 1
    assert root_cause((1, 5), (None, None), (PEER, ""), exit_order=[0, 1]) == 1
    assert root_cause((-15, -15), (None, None), ("", ""), signalled={0, 1}) is None


def test_read_tail_bounds_junk(tmp_path):
    log = tmp_path / "junk.log"
    log.write_bytes(bytes(range(256)) * 64 + b"\n" + b"x" * (1 << 20) + b"\nlast line\n")
    tail = clean_tail(log.read_bytes()[-TAIL_BYTES:])
    assert tail.endswith("last line")
    assert len(tail) < 5000 and "\x00" not in tail and "\x1b" not in tail


def test_free_port_is_bindable():
    import socket
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


# ---------------------------------------------------------------- real trials

slow = pytest.mark.slow


def rank_log(plan: LaunchPlan, r: int) -> str:
    return Path(plan.ranks[r].log_path).read_text(errors="replace")


@slow
def test_ok_trial_records_results(tmp_path):
    plan, res = run(tmp_path)
    assert (res.outcome, res.reason, res.log_tail) == ("ok", "", "")
    assert res.exit_codes == (0, 0)
    assert [r["rank"] for r in res.rank_results] == [0, 1]
    assert all(r["samples_per_second"] > 0 for r in res.rank_results)
    assert res.launched_at <= time.time() - res.wall_seconds + 1
    assert Path(plan.request_path).exists()


@slow
@pytest.mark.parametrize("fault,outcome,reason", [
    ("exit3", "crash", "rank 1 exited with code 3"),
    ("segfault", "crash", "rank 1 killed by SIGSEGV"),
    ("sigkill", "oom", "rank 1 killed by SIGKILL not sent by autotune"),
    ("oom", "oom", "rank 1 exited with code 1; its log reports memory exhaustion"),
    ("no_result", "crash", "rank 1 exited 0 without a result"),
    ("malformed", "crash", "rank 1 exited 0 with a malformed result"),
    ("unavailable", "unavailable", "rank 1: backend unavailable (exit 79)"),
    ("workload_error", "workload_error", "rank 1: workload error (exit 80)"),
    ("bad_config", "bad_config", "rank 1: threads: planned 1, in force 2"),
])
def test_failing_rank_tears_down_a_waiting_peer(tmp_path, fault, outcome, reason):
    # on_peer_error=hang: rank 0 never gives up on its collective, so only the runner ends it.
    plan, res = run(tmp_path, {"1": fault}, timeout_s=30, on_peer_error="hang")
    assert res.outcome == outcome and res.reason.startswith(reason), res
    assert "--- rank 1 " in res.log_tail and "fake_trainer rank 1:" in res.log_tail
    assert "fake_trainer rank 0:" not in res.log_tail
    # rank 1 fails within a few seconds of start; the rest is the grace period, not the timeout
    assert res.wall_seconds < 15, res
    if fault == "oom":
        assert "MemoryError" in res.log_tail


@slow
def test_rank0_fault_blames_rank0_not_the_victim(tmp_path):
    plan, res = run(tmp_path, {"0": "exit3"})   # rank 1 dies on its own of the torn connection
    assert (res.outcome, res.reason) == ("crash", "rank 0 exited with code 3")
    assert "--- rank 0 " in res.log_tail
    assert "Connection closed by peer" in rank_log(plan, 1) or res.exit_codes[1] == -15


@slow
@pytest.mark.parametrize("fault", ["hang_collective", "hang_before_init"])
def test_hang_is_a_timeout(tmp_path, fault):
    plan, res = run(tmp_path, {"1": fault}, timeout_s=6)
    assert res.outcome == "timeout"
    assert res.reason == "exceeded the trial timeout of 6s; no result from rank(s) 0, 1"
    assert "--- rank 0 " in res.log_tail and "--- rank 1 " in res.log_tail
    assert f"fake_trainer rank 1: hanging" in res.log_tail
    assert 6 <= res.wall_seconds < 6 + 2 + 1.5, res   # timeout + grace + slack


@slow
def test_hang_at_exit_keeps_the_measurement(tmp_path):
    plan, res = run(tmp_path, {"0": "hang_at_exit", "1": "hang_at_exit"}, timeout_s=30)
    assert (res.outcome, res.reason) == ("ok", "")
    assert all(r["samples_per_second"] > 0 for r in res.rank_results)
    assert res.wall_seconds < 15, res


@slow
def test_junk_output_then_ok(tmp_path):
    plan, res = run(tmp_path, {"1": "junk"})
    assert res.outcome == "ok"
    assert Path(plan.ranks[1].log_path).stat().st_size > 1 << 20


@slow
def test_junk_output_then_crash_gives_a_bounded_printable_tail(tmp_path):
    plan, res = run(tmp_path, {"1": "junk+exit3"}, on_peer_error="hang")
    assert (res.outcome, res.reason) == ("crash", "rank 1 exited with code 3")
    assert "exiting with code 3" in res.log_tail and len(res.log_tail) < 20_000
    assert all(c.isprintable() or c == "\n" for c in res.log_tail)


@slow
@pytest.mark.parametrize("fault,outcome", [("spawn_grandchild", "timeout"),
                                           ("spawn_grandchild+exit3", "crash")])
def test_grandchildren_do_not_survive(tmp_path, fault, outcome):
    seen = []
    plan = make_plan(tmp_path, {"1": fault}, timeout_s=8, on_peer_error="hang")
    res = run_plan(plan, on_start=seen.extend)
    assert res.outcome == outcome, res
    assert "spawned grandchildren" in rank_log(plan, 1)
    assert len(seen) == 2 and survivors(plan) == []


@slow
@pytest.mark.parametrize("fault,outcome", [("ok", "ok"), ("segfault", "crash")])
def test_numactl_prefix(tmp_path, fault, outcome):
    # The planner's binding prefix: numactl execs python, so the rank pid is the trainer itself.
    plan = make_plan(tmp_path, {"1": fault}, on_peer_error="hang")
    ranks = tuple(RankPlan(**{**rp.__dict__, "argv": ("numactl", f"--physcpubind={rp.rank % 2}",
                                                      *rp.argv)}) for rp in plan.ranks)
    plan = LaunchPlan(**{**plan.__dict__, "ranks": ranks})
    res = run_plan(plan)
    assert res.outcome == outcome, res
    if fault == "ok":
        assert [r["in_force"]["cpus"] for r in res.rank_results] == [[0], [1]]
    else:
        assert res.reason == "rank 1 killed by SIGSEGV"
    assert survivors(plan) == []


@slow
def test_real_worker_failure_blames_the_failing_rank(tmp_path):
    # autotune/worker/main.py writes a result on failure too; the victim's says "crash" as well.
    from autotune.config import Config
    from autotune.plan.build import build_plan
    from autotune.probe import probe
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    plan = build_plan(Config(nproc=2, threads=1), probe(), workload="crashing_workload:build",
                      workload_args={"crash_rank": 0}, workdir=str(tmp_path), timeout_s=60,
                      grace_s=2, master_port=free_port(), base_env=env,
                      trial_id=uuid.uuid4().hex, target_seconds=1.0)
    res = run_plan(plan)
    assert res.outcome == "crash", res
    assert res.reason == "rank 0 exited with code 1: ValueError: injected failure in make_batch " \
                         "on rank 0", res
    assert "--- rank 0 " in res.log_tail and "injected failure" in res.log_tail
    assert res.rank_results[1]["status"] == "crash"    # the victim's own report, kept as written
    assert survivors(plan) == []


@slow
def test_missing_binary_is_a_crash_not_an_exception(tmp_path):
    plan = make_plan(tmp_path)
    bad = plan.ranks[1].__class__(**{**plan.ranks[1].__dict__, "argv": ("/nonexistent/python",)})
    plan = LaunchPlan(**{**plan.__dict__, "ranks": (plan.ranks[0], bad)})
    res = run_plan(plan)
    assert res.outcome == "crash" and "rank 1 could not be started" in res.reason
    assert survivors(plan) == []


CHILD = textwrap.dedent("""
    import sys, pathlib
    sys.path[:0] = [{repo!r}, {tests!r}, {here!r}]
    from test_runner import make_plan
    from autotune.run.runner import interrupt_on_sigterm, run_plan
    tmp = pathlib.Path({tmp!r})
    plan = make_plan(tmp, {{"1": {fault!r}}}, timeout_s=60, grace_s=2)
    (tmp / "trial_id").write_text(plan.env_delta["AUTOTUNE_TRIAL_ID"] + " " + str(plan.master_port))
    try:
        with interrupt_on_sigterm():
            run_plan(plan, on_start=lambda pids: (tmp / "pids").write_text(repr(pids)))
    except KeyboardInterrupt as e:
        print("interrupted:", type(e).__name__, e, flush=True)
        sys.exit(130)
    sys.exit(0)
""")


def start_runner(tmp: Path, fault: str = "hang_collective") -> subprocess.Popen[str]:
    """A runner in its own Python process, mid-trial (rank 1 hung, rank 0 in all_reduce)."""
    tmp.mkdir(mode=0o700, exist_ok=True)   # a trial's folder is 0700 (util/checked_folder.py)
    code = CHILD.format(repo=str(REPO), tests=str(TESTS), here=str(TESTS / "integration"),
                        tmp=str(tmp), fault=fault)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    log1 = tmp / "rank1.log"
    deadline = time.monotonic() + 30
    while not (log1.exists() and "hanging" in log1.read_text(errors="replace")):
        assert time.monotonic() < deadline and child.poll() is None, child.communicate()
        time.sleep(0.1)
    return child


def child_trial(tmp: Path) -> LaunchPlan:
    """Enough of the child's plan for survivors(): its trial id and port."""
    trial_id, port = (tmp / "trial_id").read_text().split()
    stub = make_plan(tmp)
    ranks = tuple(RankPlan(**{**rp.__dict__, "env": {"AUTOTUNE_TRIAL_ID": trial_id}})
                  for rp in stub.ranks)
    return LaunchPlan(**{**stub.__dict__, "master_port": int(port), "ranks": ranks})


@slow
def test_reap_orphans_after_kill_9_spares_live_trials(tmp_path):
    # Rank 1 ignores SIGTERM: the SIGTERM a rank gets when autotune dies (PR_SET_PDEATHSIG)
    # ends rank 0, and rank 1 is the orphan a later search must reap.
    dead = start_runner(tmp_path / "dead", "ignore_sigterm+hang_collective")
    live = start_runner(tmp_path / "live")
    try:
        dead.kill()                       # kill -9 of the search
        dead.wait()
        rank0, rank1 = eval((tmp_path / "dead" / "pids").read_text())
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(rank0).wait(timeout=10)   # ended with its parent (else: TimeoutExpired)
        orphans = child_trial(tmp_path / "dead")
        assert len(survivors(orphans)) == 1
        killed = reap_orphans(str(tmp_path))
        assert killed == [rank1]
        time.sleep(0.5)                   # SIGKILL is asynchronous
        assert survivors(orphans) == []
        assert all(psutil.pid_exists(p) for p in eval((tmp_path / "live" / "pids").read_text()))
    finally:
        live.send_signal(signal.SIGINT)
        live.communicate(timeout=15)
        reap_orphans(str(tmp_path / "dead"))  # a failed assertion must not leak the orphans
    assert survivors(child_trial(tmp_path / "live")) == []


@slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_mid_trial_kills_every_process(tmp_path, sig):
    child = start_runner(tmp_path)
    pids = eval((tmp_path / "pids").read_text())
    assert all(psutil.pid_exists(p) for p in pids)
    sent = time.monotonic()
    child.send_signal(sig)
    out, _ = child.communicate(timeout=15)
    assert child.returncode == 130, out
    assert time.monotonic() - sent < 2 + 4, out    # grace plus slack
    expected = ("Interrupted interrupted by SIGTERM" if sig == signal.SIGTERM
                else "KeyboardInterrupt")
    assert f"interrupted: {expected}" in out
    assert survivors(child_trial(tmp_path)) == []


@slow
def test_second_ctrl_c_during_teardown_still_kills_everything(tmp_path):
    # rank 1 ignores SIGTERM, so teardown sits in its 2 s grace when the impatient user presses
    # Ctrl-C again; that signal is held until cleanup is done, then SIGKILL has ended rank 1.
    child = start_runner(tmp_path, "ignore_sigterm+hang_collective")
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    time.sleep(0.5)
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=15)
    assert child.returncode == 130, out
    assert 2 <= time.monotonic() - sent < 2 + 4, out
    assert survivors(child_trial(tmp_path)) == []


@slow
def test_rank_ignoring_sigterm_is_killed_after_grace(tmp_path):
    plan, res = run(tmp_path, {"1": "ignore_sigterm+hang_collective"}, timeout_s=5, grace_s=1.5)
    assert res.outcome == "timeout" and res.exit_codes == (-signal.SIGTERM, -signal.SIGKILL), res
    assert 5 + 1.5 <= res.wall_seconds < 5 + 1.5 + 1.5, res


def test_interrupted_is_a_keyboard_interrupt():
    assert issubclass(Interrupted, KeyboardInterrupt)
    assert not issubclass(Interrupted, Exception)
    with pytest.raises(Interrupted), interrupt_on_sigterm():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


# ---------------------------------------------------------------- the shim as a host's launcher

def _shim(tmp: Path, code: str, *extra: str) -> subprocess.CompletedProcess:
    """`python -m autotune.bind --node-rank 1 --local-ranks 2 ... -- python -c CODE`, as a trial
    across hosts starts one host's ranks over ssh (plan/cluster.py)."""
    return subprocess.run([sys.executable, "-m", "autotune.bind", "--node-rank", "1",
                           "--local-ranks", "2", "--env", "WHO=first;second;third;fourth",
                           "--rank-log", str(tmp / "rank{rank}.log"), *extra, "--",
                           sys.executable, "-c", code],
                          env={**os.environ, "WORLD_SIZE": "4", "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=60)


def test_shim_starts_a_hosts_ranks_with_torchruns_numbers(tmp_path):
    code = ("import os; print(' '.join(os.environ[k] for k in ('RANK', 'LOCAL_RANK', "
            "'LOCAL_WORLD_SIZE', 'WORLD_SIZE', 'GROUP_RANK', 'AUTOTUNE_PLAN_INDEX', 'WHO')))")
    done = _shim(tmp_path, code)
    assert done.returncode == 0, done.stderr
    # node 1 of 2, two ranks each: planned ranks 2 and 3, each with its own value of --env
    assert (tmp_path / "rank2.log").read_text().split() == "2 0 2 4 1 2 third".split()
    assert (tmp_path / "rank3.log").read_text().split() == "3 1 2 4 1 3 fourth".split()


def test_shim_ends_the_other_ranks_when_one_fails(tmp_path):
    """A rank that fails must not leave its peer waiting in a collective for ever: the shim ends
    the peer and exits with the failed rank's code, as torchrun's agent does."""
    code = ("import os, sys, time\n"
            "open(os.environ['WHO'], 'w').write(str(os.getpid()))\n"
            "if os.environ['LOCAL_RANK'] == '1': time.sleep(0.5); sys.exit(3)\n"
            "time.sleep(600)")
    done = _shim(tmp_path, code.replace("os.environ['WHO']",
                                        f"'{tmp_path}/' + os.environ['WHO']"))
    assert done.returncode == 3, done.stderr
    sleeper = int((tmp_path / "third").read_text())
    assert not psutil.pid_exists(sleeper) or \
        psutil.Process(sleeper).status() == psutil.STATUS_ZOMBIE
