"""`autotune verify` after a search that recommended the default launch: it measures the search's
best stored candidates again instead of refusing (issue 35: the search said "run `autotune
verify`", and verify then refused). The search, the storage and verification are the production
code; the trials' measurements come from tests/results_study.py's formula."""
from __future__ import annotations

import math

from autotune.config import Config
from autotune.export.recommendation import save_recommendation
from autotune.progress import Silent
from autotune.recommend.reverify import lineup, reverify, seeded_confirmation
from autotune.recommend.recommendation import Recommendation
from autotune.search.lineup import pick_candidates
from autotune.study.attrs import StudyAttrs
from autotune.study.records import records
from results_study import Landscape, live_topology, make_study


def _default_recommended(tmp_path):
    study = make_study(tmp_path / "s.db", verify_rec=False)
    save_recommendation(study, Recommendation(config=Config(), speedup=1.0, spread=0.0,
                                              rounds=2, verified=True, default_wins=True,
                                              default_throughput=100.0), live_topology(), "cnn")
    return study


def test_the_default_launch_recommended_means_the_best_stored_candidates_are_measured(tmp_path):
    study = _default_recommended(tmp_path)
    default, chosen = lineup(study)
    assert default.config == Config()
    assert [c.config for c in chosen] == [c.config for c in pick_candidates(records(study))]
    assert chosen and all(c.config != Config() for c in chosen)

    seen = []
    sim = Landscape()

    class Seen(Silent):
        def verify_start(self, *, config, **_):
            seen.append(("verify_start", config))

        def confirm_start(self, *, config, **_):
            seen.append(("confirm_start", config))

    accept = seeded_confirmation(study, sim, time_left=lambda: math.inf, progress=Seen())
    done = reverify(study, sim, rounds=3, time_left=lambda: math.inf, progress=Seen(),
                    accept=accept)
    measured = {c for kind, c in seen if kind == "verify_start"}
    assert Config() in measured and set(c.config for c in chosen) <= measured
    rec = done.recommendation
    # the formula's best feasible candidate is faster than the default in every round
    assert rec.config != Config() and rec.verified and rec.speedup > 1.5
    assert done.replaces and done.previous == "no verified speedup over the default launch"
    # two ranks split the batch: other math, so the search's seeded confirmation ran first
    assert rec.config.nproc == 2 and ("confirm_start", rec.config) in seen
    assert "side by side" in rec.extra["quality"]


def test_a_stored_recommendation_is_still_measured_alone(tmp_path):
    study = make_study(tmp_path / "s.db", verify_rec=True)
    stored = Config.from_dict(StudyAttrs.of(study).recommendation["config"])
    assert stored != Config()
    _default, chosen = lineup(study)
    assert [c.config for c in chosen] == [stored] and chosen[0].role == "recommended"
