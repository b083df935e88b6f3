"""Issue 34, item 7: `autotune verify` took no lock, so beside a search it measured under that
search's load and could overwrite the recommendation the search had just stored.

- verify takes the search's machine lock: with a search holding it (a real process), verify is
  one line, exit 2, and the study is unchanged;
- verify stores its figure under the study lock, only if the stored recommendation is still the
  one it measured: a search storing a new one while verify runs keeps it.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from paths import REPO
from results_study import live_topology

from autotune.cli import main
from autotune.config import Config

@pytest.fixture
def lock_folder(tmp_path, monkeypatch):
    """A machine-lock folder of this test's own: other tests (and people) run searches here."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    return run


def make_study(tmp_path, threads: int = 1) -> str:
    """A finished study of this machine on the small MLP (as in test_contention_real)."""
    from autotune.export.recommendation import save_recommendation
    from autotune.recommend.recommendation import Recommendation
    from autotune.study.storage import describe_study, open_storage, open_study, study_name
    topo = live_topology()
    url = f"sqlite:///{tmp_path}/s.db"
    study = open_study(open_storage(url), study_name("mlp", topo))
    describe_study(study, topology=topo, workload="mlp", space={},
                   settings={"target_seconds": 1.0})
    save_recommendation(study, Recommendation(config=Config(threads=threads), speedup=1.3,
                                              spread=0.4, rounds=3, verified=True), topo, "mlp")
    return url


def stored(url: str) -> dict:
    import optuna
    name = optuna.get_all_study_summaries(url)[0].study_name
    return optuna.load_study(study_name=name, storage=url).user_attrs["recommendation"]


HOLD_MACHINE = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {repo!r})
    from autotune.probe import probe
    from autotune.search.lock import MachineLock
    with MachineLock(probe().fingerprint()):
        print("held", flush=True)
        time.sleep(120)
""")


def test_verify_beside_a_running_search_is_one_line_and_exit_2(tmp_path, lock_folder, capsys):
    url = make_study(tmp_path)
    before = stored(url)
    search = subprocess.Popen([sys.executable, "-c", HOLD_MACHINE.format(repo=str(REPO))],
                              stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        assert search.stdout.readline() == "held\n"
        rc = main(["verify", "--storage", url, "--results", str(tmp_path), "--budget", "60s"])
    finally:
        search.kill()
        search.wait()
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err                 # was: verify ran beside it
    assert "another autotune search is running on this machine (pid " in err[0]
    assert "run verify once it has finished" in err[0]
    assert stored(url) == before


VERIFY = [sys.executable, "-m", "autotune", "verify", "--budget", "90s", "--rounds", "1"]


@pytest.mark.scenario
def test_a_recommendation_stored_by_a_search_during_verify_is_kept(tmp_path, lock_folder):
    """A search beside verify (another machine's worker of a shared study, or one started with
    --allow-concurrent) stores a new recommendation while verify measures the old one."""
    from autotune.export.recommendation import save_recommendation
    from autotune.recommend.recommendation import Recommendation
    from autotune.search.shared import StudyLock
    from autotune.study.storage import open_storage, open_study
    url = make_study(tmp_path)
    verify = subprocess.Popen([*VERIFY, "--storage", url, "--results", str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    first = verify.stderr.readline()
    assert "autotune: round 1" in first, first + verify.communicate()[1]   # measuring now
    import optuna
    study = open_study(open_storage(url), optuna.get_all_study_summaries(url)[0].study_name)
    lock = StudyLock(url, study.study_name)
    with lock.held():                                        # as a shared search stores its own
        save_recommendation(study, Recommendation(config=Config(threads=2), speedup=1.5,
                                                  spread=0.2, rounds=3, verified=True),
                            live_topology(), "mlp")
    lock.close()
    out, err = verify.communicate(timeout=300)
    assert verify.returncode == 0, err[-2000:]
    assert stored(url)["config"]["threads"] == 2            # was: overwritten by verify's
    assert "not stored: a search stored a new recommendation while this ran" in out, out
