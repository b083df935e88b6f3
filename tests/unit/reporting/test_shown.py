"""reporting/shown.py: the study as the dashboard shows it (issue 63), on a study made through the
real pipeline (results_study), and on the same study as an older autotune stored it."""
from __future__ import annotations

import math

import optuna
import pytest
from optuna.trial import TrialState

from autotune.reporting.report import build_report
from autotune.reporting.shown import DROP_BOUND, NEVER_RAN, VERDICT, shown_trials
from autotune.study.attrs import StudyAttrs
from autotune.study.records import UNMEASURED_ACCURACY
from results_study import study_copy


@pytest.fixture
def study(tmp_path):
    return optuna.load_study(study_name=None,
                             storage=f"sqlite:///{study_copy(tmp_path / 'results')}")


def _as_older_autotune_stored(study: optuna.Study) -> list:
    """The trials as stored before issue 63: a trial without a measurement COMPLETE at (0, 0)."""
    out = []
    for t in study.get_trials():
        if t.state == TrialState.PRUNED and "config" in t.user_attrs:
            t.state, t.values = TrialState.COMPLETE, [0.0, 0.0]
        out.append(t)
    return out


def _view(trials, attrs):
    return [(t.number, t.state, t.values, t.user_attrs.get(VERDICT)) for t in
            shown_trials(trials, attrs)]


def test_each_trial_is_shown_as_measured(study):
    attrs = StudyAttrs.of(study)
    shown = {t.number: t for t in shown_trials(study.get_trials(), attrs)}
    floor = attrs.noise_floor["mean"]
    # the default launch: stored before its class was quality-run, shown at its measured quality
    assert study.trials[0].values[1] == UNMEASURED_ACCURACY
    assert shown[0].state == TrialState.COMPLETE and shown[0].values[1] == pytest.approx(floor)
    assert shown[0].user_attrs["accuracy"] == pytest.approx(floor)
    for t in shown.values():
        outcome = t.user_attrs.get("outcome")
        if outcome == "infeasible":            # ruled out before launch: never drawn
            assert t.state == TrialState.PRUNED and t.values is None and t.user_attrs[NEVER_RAN]
        elif outcome not in (None, "ok"):       # ran and failed: Optuna's own FAIL
            assert t.state == TrialState.FAIL and t.values is None
        elif t.state == TrialState.COMPLETE:    # no accuracy no run gave
            assert t.values[1] != 0.0 and (t.values[1] > 0 or t.values[1] == -math.inf)
            assert t.user_attrs[VERDICT]
    # the verdict column is the report's words, with a number to sort by
    within = [t for t in shown.values() if str(t.user_attrs.get(VERDICT)).startswith("within 1 pp")]
    assert within and all(isinstance(t.user_attrs[DROP_BOUND], float) for t in within)
    # the feasible non-dominated trials are report's Pareto front
    from benchmarks.timed.dashboard_shown import dashboard_front
    assert dashboard_front(list(shown.values())) == {r.number for r in build_report(study).pareto}


def test_a_study_stored_by_an_older_autotune_is_shown_the_same(study):
    attrs = StudyAttrs.of(study)
    older = _as_older_autotune_stored(study)
    assert any(t.values == [0.0, 0.0] for t in older)
    assert _view(older, attrs) == _view(study.get_trials(), attrs)


def test_the_sampler_learns_from_a_pruned_trial_with_its_constraint(study):
    """TPE puts a trial with a violated constraint in its infeasible group whatever its state:
    the PRUNED trial stored now splits like the (0, 0) COMPLETE trial stored before."""
    from optuna.samplers._tpe.sampler import _split_trials
    now = study.get_trials(states=(TrialState.COMPLETE, TrialState.PRUNED))
    before = [t for t in _as_older_autotune_stored(study)
              if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    for n_below in (1, 3, 6):
        split_now = [[t.number for t in part] for part in _split_trials(study, now, n_below)]
        split_before = [[t.number for t in part] for part in _split_trials(study, before, n_below)]
        assert split_now == split_before
