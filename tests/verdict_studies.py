"""Stored studies whose recommendation carries each verdict (settled, lower bound, unsettled),
written by the production `save_recommendation` into real SQLite: a copy of results_study's
finished study with its recommendation replaced.

ISSUE_ROUNDS stand for issue 47's first command (AMD EPYC of family 25, Zen 4, 2 cores,
2026-11-27, `autotune search --budget 10m`): 12 quiet rounds from 1.5x to 2.4x around 1.90x,
whose 95% interval 1.71-2.13x is wider than the ±10% that settles a figure. They prove at least
1.75x (the one-sided 95% lower bound)."""
from __future__ import annotations

from pathlib import Path

import optuna

from autotune.config import Config
from autotune.export.recommendation import save_recommendation
from autotune.recommend.settle import settle
from autotune.recommend.recommendation import Recommendation
from results_study import live_topology, study_copy

ISSUE_ROUNDS = [1.50, 1.54, 1.60, 1.68, 1.80, 1.88, 1.92, 2.02, 2.17, 2.31, 2.37, 2.40]
LOWER_BOUND_HEADLINE = ("verified speedup ≥1.75x over the default launch (95% lower bound, "
                        "12 rounds; median 1.90x)")
# Three quiet rounds whose one-sided 95% lower bound is 0.999x: at or below 1, no figure.
WIDE_ROUNDS = [1.1, 1.4, 1.2]


def recommendation(ratios: list[float], config: Config = Config(nproc=2, threads=1),
                   **kw) -> Recommendation:
    s = settle(ratios, [0.0] * len(ratios))
    return Recommendation(config=config, speedup=s.ratio, spread=0.3, rounds=len(ratios),
                          verified=True, settling=s, throughput=100.0 * s.ratio,
                          default_throughput=100.0, **kw)


def study_recommending(folder: Path, rec: Recommendation) -> tuple[str, optuna.Study]:
    """(storage URL, study): results_study's finished study (workload cnn, measured on this
    machine) with `rec` stored as its recommendation, command and dashboard note included."""
    db = study_copy(folder)
    url = f"sqlite:///{db}"
    study = optuna.load_study(study_name=None, storage=url)
    save_recommendation(study, rec, live_topology(), "cnn")
    return url, study
