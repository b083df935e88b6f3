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
