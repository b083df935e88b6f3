"""Issue 54: launches kept across two namespace hosts (scripts/testhosts.sh), for real: a window
knob is served by the ranks already running on both hosts; a rank killed while idle or a dropped
ssh connection ends the launch on every host and the next trial starts afresh; Ctrl-C in the
runner, or the runner killed outright, leaves no process on either host. The hosts are brought up
once for the module (test_multihost's fixture and process count)."""
from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import test_multihost as mh
from autotune.cli import main
from other_user import other_user  # noqa: F401  (a real second uid)
from test_multihost import hosts  # noqa: F401  (the module's two namespace hosts)

pytestmark = pytest.mark.slow
LAUNCH = dict(nnodes=2, nproc=2, threads=1, binding="taskset")


@pytest.fixture(scope="module")
def cluster(hosts, tmp_path_factory):  # noqa: F811
    """The two hosts probed once, as a search probes them (each reaches the results folder)."""
    from autotune.commands.hosts import Hosts, probe_hosts
    results = tmp_path_factory.mktemp("kept-results")
    return probe_hosts(Hosts(hosts="th1:1,th2:1", ssh_config=hosts), say=print,
                       results=str(results))


def workers() -> dict[str, list[int]]:
    """The worker ranks running in each namespace host."""
    out = {}
    for ns in mh.NAMESPACES:
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                              text=True).stdout.split()
        found = []
        for pid in pids:
            try:
                argv = psutil.Process(int(pid)).cmdline()
                if "autotune.worker" in argv and "autotune.bind" not in argv:   # not the shim
                    found.append(int(pid))
            except psutil.Error:
                pass
        out[ns] = sorted(found)
    return out


def window_then_launch_knob(config, topology, settings, warm):
    """A launch started on both hosts; a window knob served by its same processes on both, with
    nothing new started; a launch-level knob starting new ones beside them, as on one machine
    (both launches kept: a rank of each on each host). (its ranks per host, its session, the
    ranks of both launches per host)."""
    from autotune.run.trial import run_trial
    assert run_trial(config, topology, settings, warm=warm).ok
    first = workers()
    assert all(len(p) == 1 for p in first.values()), first
    window = run_trial(config.with_(global_batch=64), topology, settings, warm=warm)
    assert window.ok and window.throughput and (warm.starts, warm.windows) == (1, 1)
    assert workers() == first
    kept = next(reversed(warm.open.values()))[0]
    assert run_trial(config.with_(binding="none"), topology, settings, warm=warm).ok
    both = workers()
    assert warm.starts == 2 and all(len(both[ns]) == 2 and set(first[ns]) < set(both[ns])
                                    for ns in both), (first, both)
    return first, kept, both


def test_a_kept_launch_serves_windows_on_both_hosts_and_starts_afresh_after_a_fault(
        cluster, tmp_path):
    from autotune.commands.common import Workload
    from autotune.config import Config
    from autotune.run.trial import run_trial
    from autotune.run.warm import WarmLaunches
    settings = Workload(seconds=1, results=str(tmp_path)).settings(cluster=cluster,
                                                                  timeout_s=120.0)
    config, topology, warm = Config(**LAUNCH), cluster.topologies[0], WarmLaunches()
    try:
        first, kept, both = window_then_launch_knob(config, topology, settings, warm)
        # the rank on th2 killed while idle: the launch ends on both hosts, the next trial
        # of it starts afresh and is served
        os.kill(first[mh.NAMESPACES[1]][0], signal.SIGKILL)
        kept.launch.procs[1].wait(timeout=30)   # idle: th2's launcher ends with its rank
        again = run_trial(config, topology, settings, warm=warm)
        assert again.ok and warm.starts == 3, again
        th1 = mh.NAMESPACES[0]
        second = set(workers()[th1]) - set(both[th1])   # the new launch's rank on th1
        assert len(second) == 1 and first[th1][0] not in workers()[th1], (first, second)
        # th2's ssh connection drops while idle (its client killed here): the same
        session = next(reversed(warm.open.values()))[0]   # the launch just used
        session.launch.procs[1].kill()
        session.launch.procs[1].wait(timeout=30)   # dropped before the next trial looks
        again = run_trial(config, topology, settings, warm=warm)
        assert again.ok and warm.starts == 4, again
        assert not second & set(workers()[th1])
    finally:
        warm.close()
    assert mh.leftovers() == {ns: [] for ns in mh.NAMESPACES}


RUNNER = """
import json, sys
from pathlib import Path
from autotune.commands.common import Workload
from autotune.config import Config
from autotune.plan.cluster import cluster_from_json
from autotune.run.trial import run_trial
from autotune.run.warm import WarmLaunches
cluster = cluster_from_json(json.loads(Path(sys.argv[1]).read_text()))
config = Config(**json.loads(sys.argv[3]))
warm = WarmLaunches()
def settings(seconds):
    return Workload(seconds=seconds, results=sys.argv[2]).settings(cluster=cluster,
                                                                   timeout_s=300.0)
try:
    print("first", run_trial(config, cluster.topologies[0], settings(1), warm=warm).outcome,
          flush=True)
    print("window", run_trial(config.with_(global_batch=64), cluster.topologies[0],
                              settings(200), warm=warm).outcome, flush=True)
finally:
    warm.close()
"""


@pytest.mark.parametrize("how", ["ctrl-c", "runner killed"])
def test_no_process_outlives_a_kept_launch_on_any_host(cluster, how, tmp_path):
    """Mid-window (its ranks training on both hosts): Ctrl-C ends the launch through its
    teardown; a runner killed outright (SIGKILL: no teardown runs) through the ranks'
    lifeline, the launchers' stdin, which closes with it."""
    from autotune.plan.cluster import cluster_to_json
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(cluster_to_json(cluster)))
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, str(path), str(tmp_path / "res"),
                               json.dumps(LAUNCH)], stdout=subprocess.PIPE, text=True)
    try:
        assert runner.stdout.readline().split() == ["first", "ok"]
        time.sleep(3)   # the window's request is read: its ranks train on both hosts
        assert all(workers().values()), workers()
        launchers = runner_children(runner.pid)
        runner.send_signal(signal.SIGINT if how == "ctrl-c" else signal.SIGKILL)
        runner.wait(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert mh.leftovers(wait_s=20) == {ns: [] for ns in mh.NAMESPACES}
    assert not [p for p in launchers if p.is_running()
                and p.status() != psutil.STATUS_ZOMBIE], launchers


def runner_children(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


IDLE_JUDGED_S = 4.5   # run/spanning_session.JUDGED_AFTER_S and two of the ranks' reports


@pytest.mark.scenario   # ~17 s; CI: tests/integration/test_sessions.py's one-machine twin
def test_a_launch_that_polls_while_idle_on_the_hosts_is_closed(cluster, tmp_path, monkeypatch):
    """Its ranks keep a thread busy between windows (tests/idle_spinner.py, as a backend's
    polling progress thread would); the CPU of the other hosts is not seen from here, so each
    rank's own report of its wait tells, and the launch is closed before another is timed."""
    from autotune.commands.common import Workload
    from autotune.config import Config
    from autotune.run.trial import run_trial
    from autotune.run.warm import WarmLaunches
    from paths import REPO, TESTS
    monkeypatch.setenv("PYTHONPATH", f"{TESTS}{os.pathsep}{REPO}")   # reaches both hosts
    polls = Workload(workload="idle_spinner:build", seconds=1, results=str(tmp_path))
    calm = Workload(seconds=1, results=str(tmp_path))
    config, topology, warm = Config(**LAUNCH), cluster.topologies[0], WarmLaunches()
    try:
        assert run_trial(config, topology, polls.settings(cluster=cluster, timeout_s=120.0),
                         warm=warm).ok
        (poller, _), = warm.open.values()
        time.sleep(IDLE_JUDGED_S)
        assert poller.spins(IDLE_JUDGED_S)
        assert run_trial(config.with_(binding="none"), topology,
                         calm.settings(cluster=cluster, timeout_s=120.0), warm=warm).ok
        (kept, _), = warm.open.values()
        assert not poller.alive and kept is not poller
        time.sleep(IDLE_JUDGED_S)
        assert not kept.spins(IDLE_JUDGED_S)
    finally:
        warm.close()
    assert mh.leftovers() == {ns: [] for ns in mh.NAMESPACES}


@pytest.mark.scenario
def test_a_ccl_launch_is_kept_across_hosts(cluster, tmp_path):
    """oneCCL's ranks, idle between windows, report too little CPU to be closed: a window knob
    is served by the same ranks over ccl on both hosts."""
    from autotune.comm import ccl
    from autotune.commands.common import Workload
    from autotune.config import Config
    from autotune.run.trial import run_trial
    from autotune.run.warm import WarmLaunches
    if ccl.problem():
        pytest.skip(f"ccl unavailable here: {ccl.problem()}")
    settings = Workload(seconds=1, results=str(tmp_path)).settings(cluster=cluster,
                                                                  timeout_s=120.0)
    config, topology, warm = Config(**LAUNCH, backend="ccl"), cluster.topologies[0], WarmLaunches()
    try:
        first = run_trial(config, topology, settings, warm=warm)
        assert first.ok, first.reason
        ranks = workers()
        (session, _), = warm.open.values()
        time.sleep(IDLE_JUDGED_S)
        assert not session.spins(IDLE_JUDGED_S)
        window = run_trial(config.with_(precision="bf16"), topology, settings, warm=warm)
        assert window.ok and (warm.starts, warm.windows) == (1, 1), window.reason
        assert workers() == ranks
    finally:
        warm.close()
    assert mh.leftovers() == {ns: [] for ns in mh.NAMESPACES}


# A scenario (~30 s): the kept launch is the ssh test's code in CI (above), and a trial through
# mpirun across the hosts stays in CI (test_multihost.test_two_host_gloo_trial_by_each_launcher).
@pytest.mark.scenario
def test_a_window_knob_over_mpirun_is_served_by_the_same_ranks_on_both_hosts(hosts, tmp_path):  # noqa: F811
    """The same over Open MPI's mpirun (one launcher for both hosts, its orted started on th2
    over ssh): the window knob is served by the ranks already running on both hosts, and a
    launch knob starts new ones."""
    from autotune.commands.common import Workload
    from autotune.commands.hosts import Hosts, probe_hosts
    from autotune.config import Config
    from autotune.run.warm import WarmLaunches
    res = str(tmp_path / "res")
    cluster = probe_hosts(Hosts(hosts="th1:1,th2:1", ssh_config=hosts, launcher="mpirun"),
                          say=print, results=res)
    assert cluster is not None and cluster.launcher == "mpirun" and not cluster.kept_refusal
    settings = Workload(seconds=1, results=res).settings(cluster=cluster, timeout_s=120.0)
    warm = WarmLaunches()
    try:
        window_then_launch_knob(Config(**LAUNCH), cluster.topologies[0], settings, warm)
    finally:
        assert warm.close() == []
    assert mh.leftovers() == {ns: [] for ns in mh.NAMESPACES}


def link(ns: str) -> str:
    """The link on this side of namespace host `ns` (scripts/testhosts.sh: atv<tag><i> for
    atth<tag><i>): down, the host is cut off as by a dead switch port."""
    return "atv" + ns[len("atth"):]


@pytest.mark.scenario   # ~60 s (ssh's timeouts); CI: tests/unit/run/test_unreached.py
def test_a_host_cut_off_while_its_launch_is_idle(cluster, tmp_path):
    """th2's link taken down while its kept launch waits for a window: the next trial ends the
    launch on th1 within its time and fails in one line naming th2 (nothing reaches th2), the
    one after starts afresh and fails the same way, and th1 is left with nothing; the kills by
    marker th2 was owed run once its link is back, and nothing is left there either."""
    from autotune.commands.common import Workload
    from autotune.config import Config
    from autotune.run.trial import run_trial
    from autotune.run.unreached import OWED
    from autotune.run.warm import WarmLaunches
    timeout = 30.0
    settings = Workload(seconds=1, results=str(tmp_path)).settings(cluster=cluster,
                                                                  timeout_s=timeout)
    config, topology, warm = Config(**LAUNCH), cluster.topologies[0], WarmLaunches()
    th1, th2 = mh.NAMESPACES
    try:
        assert run_trial(config, topology, settings, warm=warm).ok
        first = workers()
        subprocess.run(["ip", "link", "set", link(th2), "down"], check=True)
        for attempt in ("the kept launch's window", "a fresh start"):
            began = time.monotonic()
            out = run_trial(config, topology, settings, warm=warm)
            took = time.monotonic() - began
            print(f"{attempt}: {out.outcome} in {took:.1f}s: {out.reason}")
            assert not out.ok and out.reason.startswith("launcher on th2 failed: ") and \
                "\n" not in out.reason, out
            assert took < timeout + 45, took   # the trial's time, then the teardown's
            assert mh.leftovers(wait_s=5)[th1] == [], attempt
        # no kill reached th2: one owed for each launch (its rank there may have ended by
        # itself: the window's request reached it through the folder these hosts share)
        assert [host for host, _trial in OWED.owed()] == ["th2", "th2"], OWED.owed()
        print("left on th2 while cut off:", workers()[th2], "of", first[th2])
    finally:
        subprocess.run(["ip", "link", "set", link(th2), "up"], check=True)
        owed = warm.close()
    assert owed == []   # the kills th2 was owed reached it
    assert mh.leftovers(wait_s=5) == {ns: [] for ns in mh.NAMESPACES}


@contextlib.contextmanager
def seen_on(index: int, source: Path, target: Path, hosts_config: str):
    """`target` on namespace host `index` (0-based) shows `source` instead, there only: a bind
    mount in the mount namespace its sshd and everything started over ssh there run in (each
    host's own, made by `ip netns exec`), as another disk or another copy at the same path on a
    host of its own (the processes there now see it too: they share that namespace)."""
    pid = (Path(hosts_config).parent / f"sshd{index + 1}.pid").read_text().strip()
    enter = ["nsenter", "--target", pid, "--mount", "--"]
    subprocess.run([*enter, "mount", "--bind", str(source), str(target)], check=True)
    try:
        yield
    finally:
        subprocess.run([*enter, "umount", str(target)], check=True)


def test_a_host_with_other_autotune_files_is_not_kept_and_starts_afresh(hosts, tmp_path):  # noqa: F811
    """th2 sees another copy of autotune at the same path (one comment apart, as an older copy
    on one host): the probe refuses keeping launches there in one line naming th2 and the
    difference, and each trial over both hosts starts afresh, and is served."""
    import shutil
    from autotune.commands.common import Workload
    from autotune.commands.hosts import Hosts, probe_hosts
    from autotune.config import Config
    from autotune.run.trial import run_trial
    from autotune.run.warm import WarmLaunches
    from paths import REPO
    copy = tmp_path / "autotune"
    shutil.copytree(REPO / "autotune", copy, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "__init__.py", "a") as f:
        f.write("# an older copy, on th2 only\n")
    res, said = str(tmp_path / "res"), []
    with seen_on(1, copy, REPO / "autotune", hosts):
        cluster = probe_hosts(Hosts(hosts="th1:1,th2:1", ssh_config=hosts), say=said.append,
                              results=res)
        assert cluster is not None
        refused = [line for line in said if "not kept" in line]
        assert len(refused) == 1 and re.fullmatch(
            r"autotune: launches across these hosts are not kept between trials: th2: "
            r"autotune's files differ from th1's \(digest \w+, th1: \w+\); each trial there "
            r"starts afresh", refused[0]), said
        settings = Workload(seconds=1, results=res).settings(cluster=cluster, timeout_s=120.0)
        warm = WarmLaunches()
        assert run_trial(Config(**LAUNCH), cluster.topologies[0], settings, warm=warm).ok
        assert (warm.starts, warm.windows) == (0, 0) and not warm.open   # a fresh trial, ended
        assert mh.leftovers() == {ns: [] for ns in mh.NAMESPACES}


@pytest.mark.parametrize("there", ["another disk", "another owner"])
def test_results_that_do_not_reach_a_host_as_ours_are_one_line_before_any_trial(
        hosts, tmp_path, there, capsys, other_user):  # noqa: F811
    """--results is, on th2, a folder of its own disk at the same path, or a folder of another
    uid (a shared file system that maps the user to someone else there): the search ends in
    one line naming th2 and what it found, exit 2, before any trial or study exists."""
    res = tmp_path / "res"
    (res / "trials").mkdir(parents=True, mode=0o700)
    elsewhere = tmp_path / "th2-disk"
    (elsewhere / "trials").mkdir(parents=True)
    if there == "another owner":
        for d in (elsewhere, elsewhere / "trials"):
            os.chown(d, other_user.uid, other_user.gid)
    with seen_on(1, elsewhere, res, hosts):
        rc = main(["search", "--hosts", "th1:1,th2:1", "--ssh-config", hosts, "--budget", "2m",
                   "--seconds", "1", "--results", str(res)])
    err = capsys.readouterr().err.strip().splitlines()
    found = (f"{res / 'trials'} belongs to uid {other_user.uid} ({other_user.name}) there, and "
             "autotune runs there as uid 0 (root)" if there == "another owner" else f"{res / 'trials'} there is another folder "
             "than this machine's (the file autotune just wrote in it is not there)")
    assert rc == 2 and err[-1] == (f"autotune: error: host th2 does not reach --results as this "
                                   f"machine does: {found}; give --results a folder on a file "
                                   "system every host shares, at the same path, as the same "
                                   "user (docs/clusters.md)"), err
    assert sorted(p.name for p in res.iterdir()) == ["trials"], list(res.iterdir())
    assert list((res / "trials").iterdir()) == []
