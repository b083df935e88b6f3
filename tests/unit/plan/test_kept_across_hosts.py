"""Issue 54: launches kept across hosts, as plans (no processes): which launches are kept, why
not (a host's clock, Python or autotune differs from the first host's, in one line naming the
host and the difference), and what a trial's plan gives the ranks instead of the token."""
from __future__ import annotations

import dataclasses
import shlex

import pytest

from autotune.config import Config
from autotune.plan.cluster import kept_problem
from autotune.plan.hosts import CLOCK_TOLERANCE_S, kept_refusal
from autotune.util.channel import LIFELINE_ENV, TOKEN_ENV, TOKEN_FILE, TOKEN_FILE_ENV
from test_hosts import cluster, cplan

SAME = {"python": "3.11.2", "autotune": "0.1.0", "digest": "abc123", "offset": 0.0}


def facts(**changed) -> dict:
    return {"th1": dict(SAME), "th2": {**SAME, **changed}}


def test_hosts_alike_keep_their_launches():
    assert kept_refusal(facts()) == ""
    assert kept_refusal(facts(offset=CLOCK_TOLERANCE_S * 0.9)) == ""
    assert kept_refusal({}) == ""


@pytest.mark.parametrize("changed, line", [
    ({"python": "3.12.1"}, "th2: Python 3.12.1 (th1: 3.11.2)"),
    ({"autotune": "0.2.0"}, "th2: autotune 0.2.0 (th1: 0.1.0)"),
    ({"digest": "ffff00"}, "th2: autotune's files differ from th1's (digest ffff00, th1: abc123)"),
    ({"offset": 3.24}, "th2: clock 3.2 s ahead of th1's"),
    ({"offset": -1.0}, "th2: clock 1.0 s behind th1's"),
])
def test_a_host_that_differs_is_named_with_the_difference(changed, line):
    assert kept_refusal(facts(**changed)) == line


def test_every_difference_is_on_the_one_line_and_the_first_hosts_clock_is_this_machines():
    both = facts(python="3.12.1", offset=1.0)
    both["th1"]["offset"] = 1.0
    assert kept_refusal(both) == ("th2: Python 3.12.1 (th1: 3.11.2); th1: clock 1.0 s ahead of "
                                  "this machine's")
    assert "\n" not in kept_refusal(facts(python="3.12.1", digest="x", offset=9.0))


def test_which_launches_across_hosts_are_kept():
    c = cluster()
    assert kept_problem(c) is None
    refused = dataclasses.replace(c, kept_refusal="th2: Python 3.12.1 (th1: 3.11.2)")
    assert kept_problem(refused) == refused.kept_refusal


@pytest.mark.parametrize("launcher", ["ssh", "mpirun", "srun"])
def test_a_trial_plan_names_the_token_file_and_the_lifeline_never_a_token(launcher):
    p = cplan(Config(nproc=4, nnodes=2), cluster(launcher))
    for _host, argv, _log in p.launchers:
        text = " ".join(argv)
        assert f"{TOKEN_FILE_ENV}={TOKEN_FILE}" in text and f"{LIFELINE_ENV}=1" in text
        assert TOKEN_ENV + "=" not in text      # a command line is every user's to read
    assert all(r.env[TOKEN_FILE_ENV] == TOKEN_FILE for r in p.ranks)


def test_an_export_carries_neither_the_token_file_nor_the_lifeline():
    p = cplan(Config(nproc=4, nnodes=2), cluster(), export=True)
    for _host, argv, _log in p.launchers:
        remote = shlex.split(argv[-1])
        assert not any(a.startswith((TOKEN_FILE_ENV, LIFELINE_ENV)) for a in remote)


def test_every_ssh_gives_up_on_a_host_that_stopped_answering():
    argv = cluster().ssh("node1", "true")
    assert "ServerAliveInterval=5" in argv and "ServerAliveCountMax=3" in argv
