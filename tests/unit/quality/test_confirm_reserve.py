"""What verification leaves for a seeded confirmation (quality/confirm.py Confirmation.reserve):
the default's side twice while a candidate that changes the math can still be confirmed, and
nothing once none can, so that the rounds get that time (issue 35: an 8-minute search across
hosts kept 3 minutes for a 219 s confirmation that never ran, and ended unsettled). No
processes: quality runs are a table of 40 s runs."""
from __future__ import annotations

from autotune.config import Config
from autotune.quality.confirm import Confirmation
from autotune.quality.evidence import QualityBook
from autotune.recommend.rounds import interleave
from autotune.result import Outcome, TrialResult
from autotune.study.storage import open_storage, open_study


def _run(config, mode, *, seed=0, samples=None):
    return TrialResult(outcome=Outcome.OK, accuracy=0.9, throughput=100.0, seconds=40.0)


def test_the_reserve_is_kept_only_while_a_confirmation_still_fits(tmp_path):
    book = QualityBook(open_study(open_storage(f"sqlite:///{tmp_path}/q.db"), "q"), _run,
                       batchnorm=True, tolerance_pp=1.0, seeds=(0, 1, 2))
    book.measure(Config())                           # the noise floor: 3 runs of 40 s
    left = [1000.0]
    confirm = Confirmation(book, time_left=lambda: left[0], samples=1024)
    bf16, run_cpu = Config(precision="bf16"), Config(binding="numactl", allocator="tcmalloc")
    assert confirm.reserve([bf16]) == 2 * 40.0 * 3
    # the default's math needs no confirmation: nothing to keep for it
    assert confirm.reserve([run_cpu]) == 0.0
    # bf16's confirmation: 3 seeds of default + bf16 side by side, 80 s each (bf16 unmeasured is
    # taken as long as the default): with less than 240 s left it cannot run, so nothing is kept
    left[0] = 239.0
    assert confirm.reserve([bf16, run_cpu]) == 0.0
    left[0] = 241.0
    assert confirm.reserve([bf16, run_cpu]) == 240.0


def test_rounds_past_the_asked_ones_take_the_time_no_confirmation_can_use():
    clock = {"left": 100.0}

    def evaluate(config, mode):
        clock["left"] -= 5.0
        return TrialResult(outcome=Outcome.OK, throughput=100.0, seconds=5.0)
    lineup = [("reference:default", Config()), ("search", Config(threads=1))]
    kept = interleave(lineup, evaluate, rounds=2, max_rounds=6, enough=lambda r: False,
                      time_left=lambda: clock["left"], keep_s=80.0)
    assert len(kept[0]) == 2                         # 80 s kept back: no round past the asked
    clock["left"] = 100.0
    freed = interleave(lineup, evaluate, rounds=2, max_rounds=6, enough=lambda r: False,
                       time_left=lambda: clock["left"],
                       keep_s=lambda: 80.0 if clock["left"] >= 95 else 0.0)
    assert len(freed[0]) == 6                        # asked anew: the rounds got the time


def test_a_confirmation_runs_twice_as_long_only_when_a_next_one_and_the_rounds_still_fit(tmp_path):
    """Twice as long needs room for itself, for a next class's confirmation at that length (the
    default's runs are shared), and for the rounds kept after it (`leave_s`): a first command
    confirmed a bf16 class twice as long (125 s), then the next (40 s), both refused, and had no
    time left to settle the winner. Runs here: the default 40 s, bf16 40 s (taken as long)."""
    measured = []

    def run(config, mode, *, seed=0, samples=None):
        measured.append(samples)
        return TrialResult(outcome=Outcome.OK, accuracy=0.9, throughput=100.0, seconds=40.0)

    def samples_used(left_s):
        book = QualityBook(open_study(open_storage(f"sqlite:///{tmp_path}/q{left_s}.db"), "q"),
                           run, batchnorm=True, tolerance_pp=1.0, seeds=(0, 1, 2))
        book.measure(Config())
        measured.clear()
        Confirmation(book, time_left=lambda: left_s, samples=1024,
                     leave_s=100.0).verdict(Config(precision="bf16"))
        return set(measured)

    # twice as long: 3 seeds x 2 x (40 + 40) = 480 s, a next class's 3 x 2 x 40 = 240 s, and
    # the 100 s kept for rounds: 820 s
    assert samples_used(820.0) == {2048}
    assert samples_used(819.0) == {1024}
