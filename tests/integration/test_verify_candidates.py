"""Issue 35: a search that recommended the default launch, unsettled, said "run `autotune
verify`", and verify then refused ("there is no speedup to verify"). Now verify measures the
search's best stored candidates against the default launch, for real (the small MLP, two short
rounds), and prints a headline that is either a verdict or one exact next command."""
from __future__ import annotations

import pytest

from autotune.cli import main
from autotune.config import Config
from autotune.export.recommendation import save_recommendation
from autotune.recommend.recommendation import Recommendation
from autotune.result import Outcome, TrialResult
from autotune.study.records import Role, record_trial
from autotune.study.storage import describe_study, open_storage, open_study, study_name
from results_study import live_topology


@pytest.mark.scenario
def test_verify_measures_the_stored_candidates_when_the_default_launch_was_recommended(
        tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))     # a machine lock of this test's own
    topo = live_topology()
    url = f"sqlite:///{tmp_path}/s.db"
    study = open_study(open_storage(url), study_name("mlp", topo))
    describe_study(study, topology=topo, workload="mlp", space={},
                   settings={"target_seconds": 1.0, "batchnorm": False})
    record_trial(study, config=Config(), role=Role.DEFAULT,
                 result=TrialResult(outcome=Outcome.OK, throughput=1000.0))
    candidate = Config(threads=1)      # same math as the default: no seeded confirmation
    record_trial(study, config=candidate,
                 result=TrialResult(outcome=Outcome.OK, throughput=1100.0))
    save_recommendation(study, Recommendation(config=Config(), speedup=1.0, spread=0.0, rounds=2,
                                              verified=True, default_wins=True,
                                              default_throughput=1000.0), topo, "mlp")
    rc = main(["verify", "--storage", url, "--results", str(tmp_path), "--budget", "2m",
               "--rounds", "2"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "round 1: reference:default (the default launch)" in err
    assert "round 1: search (threads=1)" in err                 # the stored candidate, measured
    headline = out.splitlines()[0]
    assert headline.startswith(("verified speedup", "no verified speedup",
                                "faster than the default launch")), out
    if "unsettled" in headline:   # no dead end: the exact command that settles it
        assert "`autotune verify --rounds" in headline or "machine is quiet" in headline, out
    assert out.splitlines()[1].startswith("  before: no verified speedup")
