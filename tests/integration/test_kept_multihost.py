"""Issue 54: launches kept across two namespace hosts (scripts/testhosts.sh), for real: a window
knob is served by the ranks already running on both hosts; a rank killed while idle or a dropped
ssh connection ends the launch on every host and the next trial starts afresh; Ctrl-C in the
runner, or the runner killed outright, leaves no process on either host. The hosts are brought up
once for the module (test_multihost's fixture and process count)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import test_multihost as mh
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
        assert run_trial(config, topology, settings, warm=warm).ok
        first = workers()
        assert all(len(p) == 1 for p in first.values()), first
        # a window knob: the same processes on both hosts serve it, nothing new starts
        window = run_trial(config.with_(global_batch=64), topology, settings, warm=warm)
        assert window.ok and window.throughput and (warm.starts, warm.windows) == (1, 1)
        assert workers() == first
        kept = next(reversed(warm.open.values()))[0]
        # a launch-level knob starts new processes, as on one machine
        assert run_trial(config.with_(binding="none"), topology, settings, warm=warm).ok
        both = workers()    # both launches are kept: a rank of each on each host
        assert warm.starts == 2 and all(len(both[ns]) == 2 for ns in both), both
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
