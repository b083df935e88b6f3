"""Issue 34, item 7: whose RUNNING trial may a starting search fail? The other search runs in a
real container-like process (its own pid namespace, `unshare`), sharing this hostname, or with a
hostname of its own standing for another machine.

- A live search in a container with the same hostname: its pid was read here, where it names
  another process (pid 1 is this machine's init), and its trial was failed under it.
- A killed search on another machine: its trials stayed RUNNING for ever (no deadline was
  passed), so the study showed them as running to every later search and report.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time

import optuna
import pytest
from optuna.trial import TrialState

from paths import REPO

from autotune.study.owners import fail_stale_running
from autotune.study.storage import open_storage, open_study

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                                reason="needs root and unshare for a pid namespace")

CLAIM = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {repo!r})
    from autotune.study.owners import claim_trial
    from autotune.study.storage import open_storage, open_study
    study = open_study(open_storage({url!r}), "autotune-x")
    trial = study.ask()
    deadline_in = {deadline_in!r}
    if deadline_in is None:
        claim_trial(study, trial)
    else:
        claim_trial(study, trial, deadline=time.time() + deadline_in)
    print("claimed", flush=True)
    time.sleep(300)
""")


def claim_elsewhere(url: str, *, deadline_in: float | None,
                    hostname: str | None) -> subprocess.Popen:
    """A search process in its own pid namespace that claims one trial and stays alive."""
    code = CLAIM.format(repo=str(REPO), url=url, deadline_in=deadline_in)
    inner = [sys.executable, "-c", code]
    if hostname:
        argv = ["unshare", "--uts", "--pid", "--fork", "--kill-child", "--mount-proc", "sh",
                "-c",
                f'hostname {hostname} && exec "$@"', "sh", *inner]
    else:
        argv = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", *inner]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = proc.stdout.readline()
    assert line == "claimed\n", line + proc.communicate()[0]
    return proc


def states(url: str) -> list[TrialState]:
    return [t.state for t in optuna.load_study(study_name="autotune-x", storage=url).trials]


def test_a_live_search_in_a_container_with_this_hostname_keeps_its_trial(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    open_study(open_storage(url), "autotune-x")
    other = claim_elsewhere(url, deadline_in=None, hostname=None)
    try:
        study = open_study(open_storage(url), "autotune-x")
        assert fail_stale_running(study) == 0          # was 1: pid 1 here is not that search
        assert states(url) == [TrialState.RUNNING]
    finally:
        other.kill()
        other.communicate()


def test_a_killed_search_on_another_machine_gives_up_its_trials_after_its_deadline(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    open_study(open_storage(url), "autotune-x")
    # its budget ended 5 minutes ago (past the grace for its last writes); then it was killed
    other = claim_elsewhere(url, deadline_in=-300, hostname="another-machine")
    other.kill()
    other.communicate()
    study = open_study(open_storage(url), "autotune-x")
    assert fail_stale_running(study) == 1              # was 0: RUNNING for ever
    trial = optuna.load_study(study_name="autotune-x", storage=url).trials[0]
    assert trial.state == TrialState.FAIL and trial.user_attrs["outcome"] == "interrupted"
    assert trial.system_attrs["autotune:owner"]["host"] == "another-machine"
    assert time.time() > trial.system_attrs["autotune:owner"]["deadline"]
