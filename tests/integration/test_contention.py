"""Contention measured on real trials: CPU hogs pinned to the trial's cores show as the share
other processes took, apart from the trial's own share (which a hog also lowers)."""
from __future__ import annotations

import os
import subprocess
import sys

from autotune.config import Config
from autotune.measure.contention import DISTURBED_SHARE
from autotune.run import outcome as R
from autotune.run.trial import TrialSettings, live_evaluator
from results_study import live_topology

HOG = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"


def start_hogs() -> list[subprocess.Popen]:
    """One busy loop pinned to each core this process may use: whatever core the trial is
    bound to, a hog shares it."""
    return [subprocess.Popen([sys.executable, "-c", HOG, str(c)])
            for c in sorted(os.sched_getaffinity(0))]


def test_hogs_on_the_trial_cores_are_measured_as_outside_share(tmp_path):
    settings = TrialSettings(workload="mlp", target_seconds=2.0, results_dir=str(tmp_path))
    evaluate = live_evaluator(live_topology(), settings, adapt_timeout=False)
    hogs = start_hogs()
    try:
        res = evaluate(Config(nproc=1, threads=1), "throughput")
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert res.outcome == R.OK, res.reason
    assert res.own_share is not None and res.outside_share is not None
    # each hog wants its whole core, so about half of the cores or more went to them
    assert res.outside_share > max(DISTURBED_SHARE, 0.3), res
    assert 0 < res.own_share and res.own_share + res.outside_share <= 1.05, res
