"""The guide searches the bottleneck first (search/guide.py, search/descent.py): it reads where
the default launch's and the leader's steps go (their stored split) and moves first the knobs
that address that part. On the captured H200 machine (16 cores, one GPU) and the real GPU space."""
from __future__ import annotations

import dataclasses

import pytest

from autotune.config import Config
from autotune.errors import SpaceError
from autotune.plan.feasible import ruled_out
from autotune.probe import probe
from autotune.probe.topology import Capabilities
from autotune.result import Outcome, TrialResult
from autotune.search.descent import DESCENT_ORDER, Descent
from autotune.search.guide import Guide, first_guess, knob_order
from autotune.search.references import default_launch
from autotune.space.resolve import find_space, load_space, parse_space, resolve
from autotune.study.records import Record, Role
from paths import MACHINES
from two_core import topo  # noqa: F401 - fixture: this 2-core machine

DATA_BOUND = {"step_s": 0.094, "data": 0.072, "copy": 0.002, "compute": 0.018, "optimizer": 0.001}
COMPUTE_BOUND = {"step_s": 0.04, "data": 0.004, "copy": 0.002, "compute": 0.032,
                 "optimizer": 0.001}


@pytest.fixture
def h200():
    t = probe(str(MACHINES / "h200-emr-16c"), collect_capabilities=False)
    t = dataclasses.replace(t, capabilities=Capabilities(
        backends=("gloo", "nccl"), numactl=True, numactl_membind=True, taskset=True, cuda=True))
    return t, resolve(load_space(find_space("gpu")), t)


def _record(config: Config, split: dict, role: str = Role.SEARCH, thr: float = 300.0) -> Record:
    return Record(config=config, role=role, feasible=True, result=TrialResult(
        outcome=Outcome.OK, throughput=thr, split=split))


def test_the_gpu_space_offers_workers_up_to_the_cores_a_rank_has(h200):
    topology, space = h200
    # 16 cores and one GPU: up to 15 workers beside the rank's own thread, not [0, 2, 4]
    assert space.knobs["dataloader_workers"] == (0, 1, 2, 4, 8, 15)
    assert space.addresses == {"dataloader_workers": ("data",), "pin_memory": ("data",)}
    too_many = space.to_config({**_default_params(space, topology), "threads": 2,
                                "dataloader_workers": 15})
    assert "usable_cores" in ruled_out(too_many, space, topology)


def _default_params(space, topology) -> dict:
    base = default_launch(space, topology)
    return {k: getattr(base, k) for k in space.knobs}


def test_a_data_bound_default_makes_the_first_guess_feed_the_step(h200):
    topology, space = h200
    launchable = lambda p: ruled_out(space.to_config(p), space, topology) is None  # noqa: E731
    plain = first_guess(space, topology, launchable)
    assert (plain["dataloader_workers"], plain["pin_memory"]) == (0, False)
    fed = first_guess(space, topology, launchable, bottleneck="data")
    # the most workers, the rank's threads fitted to the cores they leave, pinned memory
    assert (fed["threads"], fed["dataloader_workers"], fed["pin_memory"]) == (1, 15, True)
    assert launchable(fed)
    fed_part = ("dataloader_workers", "pin_memory", "threads")
    assert {k: v for k, v in fed.items() if k not in fed_part} == \
        {k: v for k, v in plain.items() if k not in fed_part}


def test_the_descent_moves_the_bottlenecks_knobs_first_and_keeps_its_order_when_computing(h200):
    _, space = h200
    computing = knob_order(space, "compute")
    assert computing == knob_order(space) and computing[:3] == ("global_batch", "compile", "precision")
    assert list(computing) == [k for k in DESCENT_ORDER if k in space.knobs] + \
        [k for k in space.knobs if k not in DESCENT_ORDER]
    # the knobs that address only data, then those that address it among others (the ranks
    # too: each makes its share of a step's batch), then the rest
    assert knob_order(space, "data")[:6] == ("dataloader_workers", "pin_memory", "binding",
                                             "threads", "nproc", "numa_binding")
    assert knob_order(space, "communication")[:2] == ("backend", "global_batch")


def test_a_space_file_says_what_a_knob_addresses(topo):
    space = resolve(parse_space("name: t\nknobs:\n  threads: [1, 2]\n  kmp_blocktime:\n"
                                "    choices: [0, 1]\n    addresses: [communication]\n",
                                source="t.yaml"), topo)
    assert knob_order(space, "communication")[0] == "kmp_blocktime"
    with pytest.raises(SpaceError, match=r"t.yaml: knobs.kmp_blocktime.addresses: text 'disk': "
                                         r"give one or more of data, compute, communication"):
        parse_space("name: t\nknobs:\n  kmp_blocktime:\n    choices: [0, 1]\n"
                    "    addresses: disk\n", source="t.yaml")


def test_the_guide_follows_the_leaders_split_once_the_default_is_measured(h200):
    topology, space = h200
    guide = Guide("descent", topology, lambda c: c.key(),
                  lambda c, s, t: ruled_out(c, s, t))
    base = default_launch(space, topology)
    known = {base.key(): _record(base, DATA_BOUND, Role.DEFAULT, thr=339.0)}
    guess = guide.next(space, known)
    assert (guess["dataloader_workers"], guess["pin_memory"]) == (15, True)
    # the guess leads and still waits on data: the descent moves the pipeline first
    fed = space.to_config(guess)
    known[fed.key()] = _record(fed, DATA_BOUND, thr=880.0)
    nxt = guide.next(space, known)
    assert {k for k in nxt if nxt[k] != guess[k]} <= {"dataloader_workers", "pin_memory",
                                                        "threads"}
    assert guide.descent.bottleneck == "data"
    # once its step computes, the order is the compute order again, from its first knob
    known[fed.key()] = _record(fed, COMPUTE_BOUND, thr=880.0)
    guide.next(space, known)
    assert guide.descent.bottleneck == "compute"


def test_a_descent_given_no_split_keeps_its_old_order(h200):
    _, space = h200
    d = Descent(h200[0])
    assert d.bottleneck is None
    lead = _default_params(space, h200[0])
    d.propose(space, lead, lambda p: False, lambda p: True)
    assert d.last[0] == knob_order(space)[0]
