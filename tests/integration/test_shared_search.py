"""A search shared by several workers through one study on a real PostgreSQL server (issue 16):
claims through the study (no configuration measured twice), one verifier, one recommendation.

The server is Debian's `postgresql`, started for this module on a unix socket in a temporary
folder (tests/pg_server.py). The claim tests use threads, each with its own storage and its own
database connection, so the advisory lock is contended for real; the last test runs two real
`autotune search` processes at once.
"""
from __future__ import annotations

import json
import re
import subprocess
import threading
import time

import optuna
import pytest
from optuna.trial import TrialState

from autotune.result import Outcome, TrialResult
from autotune.cli import main
from autotune.config import Config
from autotune.plan.placement import canonical
from autotune.search.loop import run_search
from autotune.search.options import SearchOptions
from autotune.search.references import make_sampler
from autotune.search.shared import ConfigClaims, StudyLock, Workers
from autotune.study.attrs import VERIFIER
from autotune.study.records import CLAIM_KEY, record_trial
from autotune.study.storage import open_storage, open_study
from pg_server import postgres_server
from search_harness import REPO, search_argv, search_env, survivors, write_space
from two_core import space, topo  # noqa: F401 - fixtures: a 2-core machine and its space

NAME = "autotune-shared-test"


@pytest.fixture(scope="module")
def pg_url():
    with postgres_server() as url:
        yield url


@pytest.fixture
def study_name(request):
    return f"{NAME}-{request.node.name}"[:100]


def worker(url: str, name: str):
    """What one worker process holds: its own storage (connections), study and lock."""
    study = open_study(open_storage(url), name)
    return study, StudyLock(url, name)


def test_a_claimed_configuration_is_busy_then_done_for_another_worker(pg_url, study_name):
    (study_a, lock_a), (study_b, lock_b) = worker(pg_url, study_name), worker(pg_url, study_name)
    assert lock_a.atomic and lock_b.atomic
    a = ConfigClaims(study_a, lock_a, lambda c: c.key())
    b = ConfigClaims(study_b, lock_b, lambda c: c.key())
    config = Config(nproc=2, threads=1)
    state, rec, trial = a.claim(config, study_a.ask)
    assert (state, rec) == ("mine", None) and trial is not None
    before = len(study_b.trials)
    assert b.claim(config, study_b.ask) == ("busy", None, None)
    assert len(study_b.trials) == before, "a busy claim must not leave a trial behind"
    record_trial(study_a, config=config, result=TrialResult(outcome=Outcome.OK, throughput=10.0),
                 trial=trial)
    state, rec, trial_b = b.claim(config, study_b.ask)
    assert state == "done" and trial_b is None
    assert rec.number == trial.number and rec.throughput == 10.0
    assert b.claim(Config(nproc=1), study_b.ask)[0] == "mine"   # others are free
    lock_a.close()
    lock_b.close()


def test_simultaneous_claims_give_each_configuration_to_exactly_one_worker(pg_url, study_name):
    configs = [Config(nproc=n, threads=t) for n in (1, 2) for t in (1, 2, 3, 4, 5)]
    workers = [worker(pg_url, study_name) for _ in range(3)]
    gate = threading.Barrier(len(workers))
    mine: list[list[str]] = [[] for _ in workers]
    errors: list[BaseException] = []

    def run(i: int) -> None:
        study, lock = workers[i]
        claims = ConfigClaims(study, lock, lambda c: c.key())
        try:
            for config in configs:
                gate.wait(timeout=60)        # every worker asks for this config at once
                state, _, trial = claims.claim(config, study.ask)
                if state == "mine":
                    mine[i].append(config.key())
                    record_trial(study, config=config, trial=trial,
                                 result=TrialResult(outcome=Outcome.OK, throughput=1.0))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
            gate.abort()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    claimed = [k for keys in mine for k in keys]
    assert sorted(claimed) == sorted(c.key() for c in configs), "each config exactly once"
    study = workers[0][0]
    measured = [t.user_attrs["config_key"] for t in study.get_trials(states=(TrialState.COMPLETE,))]
    assert sorted(measured) == sorted(claimed)
    for _, lock in workers:
        lock.close()


def test_an_accuracy_being_measured_by_one_worker_is_waited_for_not_measured_again(
        pg_url, study_name):
    (study_a, lock_a), (study_b, lock_b) = worker(pg_url, study_name), worker(pg_url, study_name)
    a = ConfigClaims(study_a, lock_a, lambda c: c.key())
    b = ConfigClaims(study_b, lock_b, lambda c: c.key())
    started, release = threading.Event(), threading.Event()
    got: dict[str, tuple] = {}
    measured_by_b: list[str] = []

    def measure_a():
        started.set()
        assert release.wait(timeout=120)
        study_a.set_user_attr("accuracy:32:fp32", 0.8)
        return 0.8, 5.0

    def measure_b():
        measured_by_b.append("b")
        return 0.1, 5.0

    ta = threading.Thread(target=lambda: got.update(a=a.accuracy("32:fp32", measure_a)))
    ta.start()
    assert started.wait(timeout=60)
    tb = threading.Thread(target=lambda: got.update(b=b.accuracy("32:fp32", measure_b)))
    tb.start()
    tb.join(timeout=2.5)
    assert tb.is_alive(), "b must wait while a measures"
    release.set()
    ta.join(timeout=60)
    tb.join(timeout=60)
    assert got == {"a": (0.8, 5.0), "b": (0.8, 0.0)} and not measured_by_b
    lock_a.close()
    lock_b.close()


class SimWorker:
    """One worker's evaluator and clock: a formula for throughput, 10 simulated seconds a trial,
    and a short real sleep so that the two workers' trials overlap."""

    def __init__(self):
        self.t, self.calls = 0.0, []

    def elapsed(self) -> float:
        return self.t

    def __call__(self, c: Config, mode: str) -> TrialResult:
        self.calls.append((c, mode))
        time.sleep(0.05)
        self.t += 10
        if mode == "accuracy":
            return TrialResult(outcome=Outcome.OK, accuracy=0.8, seconds=10)
        return TrialResult(outcome=Outcome.OK, throughput=100.0 + 7 * c.nproc + (c.threads or 0),
                           seconds=10)


def test_two_search_loops_on_one_study_never_measure_a_configuration_twice(
        pg_url, study_name, topo, space):  # noqa: F811 - pytest fixtures
    sims = [SimWorker(), SimWorker()]
    errors: list[BaseException] = []

    def run(sim: SimWorker, seed: int) -> None:
        study = open_study(open_storage(pg_url), study_name, sampler=make_sampler(seed))
        lock = StudyLock(pg_url, study_name)
        try:
            run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
                       options=SearchOptions(budget_s=300, min_trial_s=10, patience=100),
                       lock=lock)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            lock.close()

    threads = [threading.Thread(target=run, args=(sim, i)) for i, sim in enumerate(sims)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    ran = [canonical(c, topo).key() for sim in sims for c, mode in sim.calls
           if mode == "throughput"]
    assert len(ran) == len(set(ran)), "a configuration ran twice across the two workers"
    assert all(any(m == "throughput" for _, m in sim.calls) for sim in sims), "both worked"
    maths = [c.math_key for sim in sims for c, mode in sim.calls if mode == "accuracy"]
    assert len(maths) == len(set(maths)), "an accuracy was measured twice"
    study = optuna.load_study(study_name=study_name, storage=open_storage(pg_url))
    roles = [t.user_attrs.get("role") for t in study.trials if t.state == TrialState.COMPLETE]
    assert roles.count("reference:default") == roles.count("reference:run_cpu") == 1


def test_the_last_worker_to_finish_searching_verifies_and_the_others_read(pg_url, study_name):
    (study_a, lock_a), (study_b, lock_b) = worker(pg_url, study_name), worker(pg_url, study_name)
    a = Workers(study_a, lock_a, budget_s=600)
    b = Workers(study_b, lock_b, budget_s=600)
    assert a.join() == 0 and b.join() == 1
    what, why = a.turn()                  # a done first: b is still searching
    assert what == "wait" and "still searching" in why and b.id in why
    assert b.turn() == ("verify", None)   # the last one verifies, for both
    what, why = a.turn()
    assert what == "wait" and f"worker {b.id} is verifying" in why
    study_b.set_user_attr("recommendation", {"headline": "verified speedup 1.50x"})
    b.verified()
    assert a.turn() == ("read", {"headline": "verified speedup 1.50x"})
    claim = study_a.user_attrs[VERIFIER]
    assert claim["state"] == "done" and sorted(claim["covers"]) == sorted([a.id, b.id])
    # A search run later on the same study (a resume) verifies on its own turn.
    study_c, lock_c = worker(pg_url, study_name)
    c = Workers(study_c, lock_c, budget_s=600)
    c.join()
    assert c.turn() == ("verify", None)
    for lock in (lock_a, lock_b, lock_c):
        lock.close()


def test_a_verifier_cut_off_hands_verification_to_a_waiting_worker(pg_url, study_name):
    (study_a, lock_a), (study_b, lock_b) = worker(pg_url, study_name), worker(pg_url, study_name)
    a, b = Workers(study_a, lock_a, budget_s=600), Workers(study_b, lock_b, budget_s=600)
    a.join()
    b.join()
    assert a.turn()[0] == "wait"
    assert b.turn() == ("verify", None)
    b.verified("abandoned")               # Ctrl-C during verification
    assert a.turn() == ("verify", None)
    lock_a.close()
    lock_b.close()


@pytest.mark.slow
@pytest.mark.scenario
def test_two_searches_at_once_share_one_study_without_duplicates(pg_url, tmp_path, capsys):
    # Two real `autotune search` processes started together on one PostgreSQL study (the same
    # machine stands in for two: --allow-concurrent skips the per-machine lock). Their trials
    # run at the same time, so timings mean nothing here; what is checked is the sharing. The
    # generous trial timeout: two searches on two loaded cores are slow to start their ranks.
    space = write_space(tmp_path, [2, 3, 4, 5])
    env = search_env(tmp_path)
    procs = [subprocess.Popen(search_argv(tmp_path / f"w{i}", space, "--storage", pg_url,
                                          "--allow-concurrent", "--json", "--trial-timeout", "90",
                                          budget="5m"),
                              cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=600)
            assert p.returncode == 0, err[-3000:]
            outs.append((json.loads(out), err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    summaries = [s for s, _ in outs]
    shown = "\n".join(f"{json.dumps(s)}\n{err[-2500:]}" for s, err in outs)
    assert [s["verified_here"] for s in summaries].count(True) == 1, shown
    name = summaries[0]["study"]
    study = optuna.load_study(study_name=name, storage=open_storage(pg_url))
    measured = [t for t in study.trials if t.state == TrialState.COMPLETE
                and t.user_attrs.get("role") != "repeat"]
    keys = [t.user_attrs["config_key"] for t in measured]
    assert len(keys) == len(set(keys)), f"a configuration ran twice: {sorted(keys)}"
    owners = {t.user_attrs[CLAIM_KEY]["owner"]["pid"] for t in measured
              if CLAIM_KEY in t.user_attrs}
    assert owners == {p.pid for p in procs}, "both workers measured configurations"
    assert sum(s["trials_run"] for s in summaries) == len(measured)
    assert "recommendation" in study.user_attrs, shown
    stored = study.user_attrs["recommendation"]
    verifier = study.user_attrs[VERIFIER]
    assert verifier["state"] == "done" and sorted(verifier["covers"]) == sorted(
        s["worker"] for s in summaries)
    for s in summaries:   # both print the one stored recommendation and its command
        assert s["command"] == stored["command"]
        assert s["recommendation"]["config"] == stored["config"]
    assert not [t for t in study.trials if t.state == TrialState.RUNNING]
    assert survivors(tmp_path) == []
    assert main(["report", "--storage", pg_url]) == 0     # from any machine, on the server
    assert stored["headline"] in capsys.readouterr().out
    # a database server is storage other accounts may write: its workload entry point is
    # exported after the user has read it and passed the hash the refusal showed (issue 46)
    assert main(["export", "--format", "shell", "--storage", pg_url]) == 2
    shown = re.search(r"--trust-study ([0-9a-f]{12})", capsys.readouterr().err)
    assert shown, "the refusal names the hash to pass"
    assert main(["export", "--format", "shell", "--storage", pg_url,
                 "--trust-study", shown.group(1)]) == 0
    assert stored["headline"] in capsys.readouterr().out
