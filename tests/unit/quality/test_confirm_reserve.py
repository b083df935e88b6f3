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
    confirm = Confirmation(book, time_left=lambda: left[0])
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


def _book(tmp_path, name, quality):
    """A book whose runs give quality[(precision, seed)] (0.9 when not listed), 40 s each."""
    measured = []

    def run(config, mode, *, seed=0, samples=None):
        measured.append((config.precision, seed, samples))
        return TrialResult(outcome=Outcome.OK, accuracy=quality.get((config.precision, seed), 0.9),
                           throughput=100.0, seconds=40.0)
    book = QualityBook(open_study(open_storage(f"sqlite:///{tmp_path}/{name}.db"), "q"), run,
                       batchnorm=True, tolerance_pp=1.0, seeds=(0, 1, 2))
    book.fix_length(8192)
    return book, measured


def test_a_confirmation_pools_new_seeds_with_the_searchs_at_the_studys_length(tmp_path):
    # per-seed drops 0.0, 1.0, 0.2 on the search's seeds: not shown (upper bound 1.6 pp);
    # the three new seeds drop 0.1, 0.3, 0.2: six pairs show it within 1 pp
    drops = {0: 0.0, 1: 0.010, 2: 0.002, 100: 0.001, 101: 0.003, 102: 0.002}
    book, measured = _book(tmp_path, "pool", {("bf16", s): 0.9 - d for s, d in drops.items()})
    bf16 = Config(precision="bf16")
    book.measure(Config())
    book.measure(bf16)
    assert book.verdict(bf16).status == "not shown"
    measured.clear()
    v = Confirmation(book, time_left=lambda: 1000.0).verdict(bf16)
    assert v.accepted and v.gate.n == 6
    # default and candidate alternate, seed by seed, at the study's one length
    assert measured == [("fp32", 100, 8192), ("bf16", 100, 8192), ("fp32", 101, 8192),
                        ("bf16", 101, 8192), ("fp32", 102, 8192), ("bf16", 102, 8192)]
    assert "6 paired seeds x 8192 samples, 3 of them new, side by side" in v.why
    assert v.why.endswith("within 1 pp (95% upper bound of the drop 0.59 pp, 6 paired seeds)")


def test_a_class_beyond_the_tolerance_on_the_searchs_seeds_is_not_confirmed(tmp_path):
    book, measured = _book(tmp_path, "beyond", {("bf16", s): 0.85 for s in (0, 1, 2)})
    bf16 = Config(precision="bf16")
    book.measure(Config())
    book.measure(bf16)
    measured.clear()
    v = Confirmation(book, time_left=lambda: 1000.0).verdict(bf16)
    assert measured == [] and v.status == "beyond" and not v.accepted
    assert "beyond 1 pp (drop 5.00 pp" in v.why


def test_a_confirmation_the_time_left_cannot_hold_is_pending_and_priced(tmp_path):
    book, measured = _book(tmp_path, "late", {})
    bf16 = Config(precision="bf16")
    book.measure(Config())
    book.measure(bf16)
    measured.clear()
    confirm = Confirmation(book, time_left=lambda: 100.0)
    v = confirm.verdict(bf16)
    assert measured == [] and v.status == "pending" and not v.accepted
    assert "3 more paired seeds need about 240s" in v.why
    # equal runs: within already on 3 seeds, so settling it takes the confirmation's 3 new
    # seeds on both sides, 80 s each
    assert confirm.unconfirmed == [("precision=bf16", 240.0)]


def test_a_confirmation_adds_pairs_while_more_could_show_the_class(tmp_path):
    # drops 0.0, 1.0, 0.2 on the search's seeds, 1.2, 0.3, 1.3 on the 3 new ones: six pairs
    # bound the drop at 1.10 pp, not shown; later seeds lose 0.3 each, and the pairs that
    # gate.pairs_to_show asks for show it within
    drops = {0: 0.0, 1: 0.010, 2: 0.002, 100: 0.012, 101: 0.003, 102: 0.013}
    quality = {("bf16", s): 0.9 - d for s, d in drops.items()}
    quality.update({("bf16", s): 0.897 for s in range(103, 120)})
    book, measured = _book(tmp_path, "grow", quality)
    bf16 = Config(precision="bf16")
    book.measure(Config())
    book.measure(bf16)
    v = Confirmation(book, time_left=lambda: 10_000.0).verdict(bf16)
    assert v.accepted and 6 < v.gate.n <= 12
    assert ("bf16", 103, 8192) in measured and ("fp32", 103, 8192) in measured
    # with no time past the 3 new pairs (240 s) and the rounds it must leave, it stops there
    book2, _ = _book(tmp_path, "short", quality)
    book2.measure(Config())
    book2.measure(bf16)
    short = Confirmation(book2, time_left=lambda: 300.0, leave_s=150.0)
    v2 = short.verdict(bf16)
    assert v2.gate.n == 6 and v2.status == "not shown"
    assert v2.why.endswith("to settle it: autotune verify --quality")
