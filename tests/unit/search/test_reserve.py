"""The reserve predicted from a search's own runs (search/reserve.py), with literal numbers."""
from __future__ import annotations

import pytest

from autotune.search.budget import verify_reserve
from autotune.search.reserve import (FALLBACK_SPREAD, STORE_S, Predicted, plan_reserve,
                                     rounds_cost, rounds_that_fit, run_costs)


def test_a_start_and_a_window_are_priced_apart_with_their_spread():
    costs = run_costs([8.0, 7.0, 9.0, 8.5, 12.0], [3.3, 3.2, 3.4, 3.3])
    assert costs.start_s == 8.5 and costs.window_s == pytest.approx(3.3) and costs.windows
    # the spread from the interquartile range (IQR / 1.35), robust to the one slow start
    assert costs.start_sd == pytest.approx((9.0 - 8.0) / 1.35)
    assert costs.window_sd == pytest.approx(max(0.1 / 1.35, 0.05 * 3.3))
    # fewer than four: a quarter of the median, the safe side of the 18% a quiet re-run moved
    few = run_costs([10.0], [])
    assert (few.start_s, few.start_sd) == (10.0, FALLBACK_SPREAD * 10.0)
    assert not few.windows and few.of(True) == few.of(False) == (10.0, 6.25)
    assert run_costs([], []) is None
    # windows only: a start is no cheaper than the dearest window seen
    assert run_costs([], [3.0, 4.0]).start_s == 4.0


def test_a_running_launch_costs_its_rounds_in_windows():
    costs = run_costs([8.0] * 4, [3.0] * 4)   # spreads: 5% of the median (0.4 and 0.15)
    # default and leader running, run_cpu's settings not: 3 rounds
    got = rounds_cost(costs, [True, True, False], 3)
    assert got.mean_s == pytest.approx(3.0 * 3 + 3.0 * 3 + 8.0 + 2 * 3.0)
    assert got.var == pytest.approx(8 * 0.15 ** 2 + 0.4 ** 2)
    assert got.margin_s == pytest.approx(1.65 * got.var ** 0.5 + STORE_S)
    assert rounds_cost(costs, [], 3) == Predicted() == rounds_cost(costs, [True], 0)


def test_across_hosts_a_lineup_already_running_is_not_priced_as_starts():
    """Issue 54's 8-minute 2-host search: every start ~40 s dearer, all four lineup members
    running; reserving a start for each stopped sampling at 4:03 and left 2:15 unused."""
    costs = run_costs([52.0, 50.0, 55.0, 51.0], [6.0, 5.5, 6.5, 6.0, 6.0])
    running = verify_reserve(costs=costs, running=[True] * 4, confirm_s=0.0, rounds=3,
                             floor_s=0.0, budget_s=480.0)
    started = verify_reserve(costs=costs, running=[False] * 4, confirm_s=0.0, rounds=3,
                             floor_s=0.0, budget_s=480.0)
    # 12 windows of 6 s and 10 settling windows, against 4 starts of 51.5 s and 8 windows (254 s,
    # capped at 40% of the budget)
    assert running.total_s - running.margin_s == pytest.approx(12 * 6.0 + 10 * 6.0)
    assert started.total_s - started.margin_s == pytest.approx(0.4 * 480.0 + 10 * 6.0)
    assert running.margin_s < 6.0


def test_the_reserve_is_capped_by_share_of_the_budget_in_whole_rounds():
    slow = run_costs([15.0] * 4, [])     # a script: no windows, each run a start of 15 s
    plan = plan_reserve(slow, running=[False] * 4, rounds=3, settle_rounds=5, confirm_s=0.0,
                        budget_s=240.0)
    assert plan.verification.mean_s == pytest.approx(0.4 * 240.0)    # 12 starts: 180 s
    # 10 starts (150 s) past 15% of the budget (36 s): the nearest whole number of rounds of
    # two starts, one
    assert plan.settling.mean_s == pytest.approx(2 * 15.0)
    assert plan.total_s == pytest.approx(96.0 + 30.0 + plan.margin_s)
    # windows of 3 s: 5 rounds of two (30 s) fit in 15% of a 5-minute budget, as before
    fast = run_costs([8.0] * 4, [3.0] * 4)
    assert plan_reserve(fast, running=[True] * 4, rounds=3, settle_rounds=5, confirm_s=0.0,
                        budget_s=300.0).settling.mean_s == pytest.approx(30.0)
    # 45 s allowed: rounds of 12 s (6 s windows), 3.75 of them: 4 whole rounds; rounds of 20 s,
    # 2.25: 2 whole rounds; rounds of two 60 s starts, 0.375: none, the trials keep it
    def settling(window_s, budget_s=300.0):
        return plan_reserve(run_costs([window_s * 2] * 4, [window_s] * 4), running=[True] * 4,
                            rounds=3, settle_rounds=5, confirm_s=0.0,
                            budget_s=budget_s).settling.mean_s
    assert settling(6.0) == pytest.approx(48.0) and settling(10.0) == pytest.approx(40.0)
    assert settling(60.0) == 0.0


def test_slow_starts_keep_the_leaders_rounds_and_a_round_to_settle():
    """Issue 62's slow start, measured: a script whose launch took 20 s kept 96 s (40% of 4
    minutes) for 3 rounds of two starts that took 121 s, and 36 s to settle where a round cost
    40 s; it ended after 3 rounds with 27 s unused, unsettled. Once a configuration beyond the
    references is sampled, the reserve holds the leader's 3 rounds beside the default (6
    starts) and one whole round more (36 s is 0.9 of one)."""
    slow = run_costs([20.0] * 4, [])

    def plan(sampled, running=(False,) * 3, budget_s=240.0):
        return plan_reserve(slow, running=list(running), rounds=3, settle_rounds=5,
                            confirm_s=0.0, budget_s=budget_s, sampled=sampled)

    assert plan(True).verification.mean_s == pytest.approx(6 * 20.0)   # not 96 s: 40% of 240
    assert plan(True).settling.mean_s == pytest.approx(2 * 20.0)       # not 36 s: a part of one
    assert rounds_that_fit(slow, [False, False], plan(True).total_s) == 4
    # before any sampled trial, the lineup's 40% stands: the first few runs' margin is wide,
    # and keeping the floor then stopped a real search at its references
    assert plan(False).verification.mean_s == pytest.approx(0.4 * 240.0)
    # a lineup of the default alone prices the leader as a start
    assert plan(True, running=[True]).verification.mean_s == pytest.approx(6 * 20.0)
    # a lineup within 40% is kept whole, floor or not
    assert plan(True, budget_s=600.0).verification.mean_s == pytest.approx(9 * 20.0)
    # 22.5 s (15% of 150 s) is 0.375 of a round of two 30 s starts: none is kept
    short = plan_reserve(run_costs([30.0] * 4, []), running=[False] * 3, rounds=3,
                         settle_rounds=5, confirm_s=0.0, budget_s=150.0)
    assert short.settling.mean_s == 0.0


def test_rounds_that_fit_count_the_margin():
    costs = run_costs([15.0] * 4, [])    # sd 0.75 a start
    # a leader and the default: 30 s a round
    assert rounds_that_fit(costs, [False, False], 95.1) == 3     # 90 s + 1.65*sqrt(6*.5625)+2
    assert rounds_that_fit(costs, [False, False], 95.0) == 2
    assert rounds_that_fit(costs, [False, False], 10.0) == 0


def test_a_resumed_study_refuses_a_budget_below_what_its_own_default_costs(tmp_path):
    """Bad input: one line naming the least budget that can verify anything here, from the
    study's own measured default trial (a script whose launch takes 30 s), else the model."""
    import optuna

    from autotune.commands.search_study import check_least_budget
    from autotune.config import Config
    from autotune.errors import BudgetError
    from autotune.result import Outcome, TrialResult
    from autotune.search.budget import least_budget, plan_budget
    from autotune.study.records import Role, record_trial
    from autotune.study.storage import open_study

    study = open_study(optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/s.db"), "s")
    check_least_budget(study, 60.0)          # nothing measured: the model's floor stood already
    record_trial(study, config=Config(), role=Role.DEFAULT, result=TrialResult(
        outcome=Outcome.OK, throughput=10.0, seconds=30.0))
    assert least_budget(30.0) == 137.0       # 3 runs x 30 s x 1.5 + 2 s to store
    with pytest.raises(BudgetError) as refused:
        check_least_budget(study, 90.0)
    assert str(refused.value) == (
        "--budget 90s is too short to verify anything on this machine: one trial of the default "
        "launch (~30 s, as this study measured it) and one verification round of it beside a "
        "candidate need at least 137s; use --budget 137s or more")
    check_least_budget(study, 137.0)
    assert plan_budget(60.0).total_s == 60.0   # the tests' and CI's shortest searches still run
    with pytest.raises(BudgetError, match="need at least 60s"):
        plan_budget(59.0)


def test_before_any_window_ran_a_window_is_the_start_less_what_only_a_start_pays():
    from autotune.search.reserve import window_of_start
    fixed = {"start": 0.4, "imports": 3.1, "group": 0.5, "model": 0.6, "warmup": 0.4}
    assert window_of_start(8.0, fixed) == pytest.approx(4.0)
    assert window_of_start(8.0, None) is None                 # a script's run: not measured
    assert window_of_start(8.0, {"wait": 0.0, "model": 0.3}) is None
    costs = run_costs([8.0], [], estimated=[4.0])
    assert costs.windows and costs.of(True)[0] == 4.0 and costs.of(False)[0] == 8.0
    # once windows ran, they stand, not the estimate
    assert run_costs([8.0], [3.3], estimated=[4.0]).window_s == 3.3
