"""Issue 54: what a host says of itself before a search across hosts (run/host_facts.py), with
real folders and the real `python -m autotune.run.remote facts` run here as a host would run it:
whether it reaches the results folder as this machine does (the same folder, as the same user),
its clock's offset, its Python and autotune."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from autotune.plan.cluster import Cluster
from autotune.plan.hosts import Host
from autotune.run.host_facts import gather, reached, source_digest
from autotune.util.checked_folder import open_private

OTHER_UID = 65534


def here(cluster: Cluster, host: str, *argv: str) -> str:
    """run_on for a 'host' that is this machine: the command runs here, as over ssh."""
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def two_hosts() -> Cluster:
    return Cluster(hosts=(Host(name="h1"), Host(name="h2")), addresses=("10.0.0.1", "10.0.0.2"),
                   topologies=(None, None), python=sys.executable)  # type: ignore[arg-type]


def test_a_host_that_reaches_the_folder_says_so_and_its_clock_is_this_ones(tmp_path):
    trials = tmp_path / "res" / "trials"
    facts = gather(two_hosts(), here, str(trials))
    assert list(facts) == ["h1", "h2"]
    for f in facts.values():
        assert f["folder"] == "" and f["offset"] == 0.0 and f["uid"] == os.geteuid()
        assert f["digest"] == source_digest() and f["python"] and f["autotune"]
    assert list(trials.iterdir()) == []     # the file each host looked for is gone
    assert "folder" not in gather(two_hosts(), here, None)["h1"]


def test_a_folder_that_is_not_there_or_another_is_named(tmp_path):
    assert reached(str(tmp_path / "nowhere"), ".reach-1", "x") == \
        f"{tmp_path / 'nowhere'} does not exist there"
    folder = open_private(str(tmp_path / "res" / "trials"), create=True)
    folder.close()
    # the same path, another folder (each host's own disk): the file written here is not in it
    why = reached(str(tmp_path / "res" / "trials"), ".reach-1", "x")
    assert "is another folder than this machine's" in why


def test_a_folder_under_another_owner_is_named_with_both_users(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    folder = tmp_path / "res" / "trials"
    folder.mkdir(parents=True, mode=0o700)
    os.chown(folder, OTHER_UID, -1)
    why = reached(str(folder), ".reach-1", "x")
    assert why.startswith(f"{folder} belongs to uid {OTHER_UID}") and "autotune runs there as" \
        in why
