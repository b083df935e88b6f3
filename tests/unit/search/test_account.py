"""Where a search's budget went (search/account.py): every evaluation booked under what it was
for, and what the next budget step would buy."""
from __future__ import annotations

from autotune.config import Config
from autotune.result import Outcome, SideBySide, TrialResult
from autotune.search.account import Account, Accounted, describe, next_step


def _out(seconds: float, fixed: dict | None = None) -> TrialResult:
    return TrialResult(outcome=Outcome.OK, throughput=100.0, accuracy=0.9, seconds=seconds,
                       fixed=fixed)


def test_each_call_is_booked_by_phase_and_mode():
    calls = []

    def evaluate(config, mode, **kw):
        calls.append((config.key(), mode, kw))
        return _out(4.0 if mode == "throughput" else 10.0,
                    {"start": 0.1, "imports": 1.4} if mode == "throughput" and not calls[1:]
                    else {"wait": 0.0, "model": 0.3, "warmup": 0.2})

    account = Account()
    ev = Accounted(evaluate, account)
    ev(Config(), "throughput", leader=3.0)
    ev(Config(precision="bf16"), "throughput")
    ev(Config(precision="bf16"), "accuracy", seed=1)
    ev.phase = "recommend"
    ev(Config(), "throughput")
    ev(Config(), "accuracy", seed=100, samples=2048)
    assert calls[0][2] == {"leader": 3.0} and calls[-1][2] == {"seed": 100, "samples": 2048}
    assert account.seconds == {"trials": 8.0, "quality": 10.0, "confirmation": 10.0,
                               "verification": 4.0}
    assert account.runs == {"trials": 2, "quality": 1, "confirmation": 1, "verification": 1}
    assert account.warm_runs == 4 and len(account.configurations) == 2
    stored = account.to_json(elapsed_s=40.0, budget_s=300.0, next_step="x",
                             unused_why="the search stopped by itself")
    assert stored["other_s"] == 8.0 and stored["fixed_s"] == 3.5 and stored["unused_s"] == 260.0
    lines = describe(stored)
    assert lines[0] == ("where the budget went: trials 00:08 (2 trials), quality 00:10 (1 quality "
                        "runs), confirmation 00:10 (1 confirmation runs), verification 00:04 "
                        "(1 verification windows); other 00:08; unused 04:20")
    assert lines[2] == "  unused 04:20: the search stopped by itself"
    lines.pop(2)
    assert account.warm == {"trials": 1, "quality": 1, "confirmation": 1, "verification": 1}
    assert ("4 of 5 runs were windows of a launch already running (trials 1/2, quality 1/1, "
            "confirmation 1/1, verification 1/1)") in lines[1]
    del stored["warm"]   # an account stored before runs were told apart by kind
    assert "4 of 5 runs were windows of a launch already running;" in describe(stored)[1]
    del stored["unused_s"]   # ... or before its unused time had a row
    assert describe(stored)[0].endswith("; other 00:08")
    assert lines[2] == "  x"


def test_side_by_side_runs_pass_through_and_are_booked_each():
    class Lanes:
        def __call__(self, config, mode, **kw):
            return _out(1.0)

        def lanes(self, config):
            return 2

        def at_once(self, config, mode, seeds, samples=None):
            return [_out(20.0) for _ in seeds]

    account = Account()
    ev = Accounted(Lanes(), account)
    assert isinstance(ev, SideBySide) and ev.lanes(Config()) == 2
    ev.at_once(Config(), "accuracy", [0, 1])
    assert account.runs["quality"] == 2 and account.seconds["quality"] == 40.0


def test_the_next_step_buys_what_this_budget_left_undone_in_order():
    said = next_step(budget_s=300.0, trial_s=6.0,
                     wants=[("confirm the accuracy of precision=bf16", 70.0),
                            ("measure the quality of global_batch=64", 40.0)], exhausted=False)
    assert said == ("a 10-minute budget would also confirm the accuracy of precision=bf16 "
                    "(~70 s), measure the quality of global_batch=64 (~40 s) and measure about "
                    "31 more configurations")
    # 7.5 minutes: the next step is 10; nothing priced fits in the 150 s beyond trials
    assert next_step(budget_s=450.0, trial_s=15.0, wants=[("x", 400.0)], exhausted=False) == \
        "a 10-minute budget would also measure about 10 more configurations"
    assert next_step(budget_s=3600.0, trial_s=None, wants=[], exhausted=True) == ""


def test_verification_kept_for_windows_of_running_launches_costs_what_windows_do():
    from autotune.search.budget import verify_reserve
    from autotune.search.reserve import run_costs
    started = verify_reserve(costs=run_costs([7.5] * 6, []), running=[True, True, False],
                             confirm_s=48.0, rounds=3, floor_s=75.0, budget_s=300.0)
    warm = verify_reserve(costs=run_costs([7.5] * 6, [3.3] * 4), running=[True, True, False],
                          confirm_s=48.0, rounds=3, floor_s=75.0, budget_s=300.0)
    # a 5-minute search on the 2-core EPYC kept 168 s and used 78 (windows of 3.3 s); priced
    # as starts where nothing ran as a window, 9 starts of 7.5 s, the settling rounds that fit
    # in 15% of the budget (3 whole rounds of two starts, 45 s), one confirmation of 48 s and a
    # margin of 4.4 s
    assert round(started.total_s, 1) == 164.9
    # the default launch and the leader running, run_cpu's settings not: 33.9 s of rounds,
    # 33 s of settling windows, the confirmation and 3.3 s of margin
    assert round(warm.total_s, 1) == 118.2 and warm.confirm_s == started.confirm_s == 48.0
    assert round(warm.margin_s, 2) == 3.31
