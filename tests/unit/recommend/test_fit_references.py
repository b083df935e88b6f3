"""Rounds before breadth (recommend/fit.py) and never below a reference (recommend/references.py),
with literal numbers."""
from __future__ import annotations

from autotune.config import Config
from autotune.quality.verdict import QualityStatus, QualityVerdict
from autotune.recommend.fit import lineup_that_settles
from autotune.recommend.references import is_reference, over, reference_check
from autotune.quality.looks import LEAST_LOOK_PAIRS
from autotune.recommend.recommendation import Verified
from autotune.search.reserve import run_costs, settling_rounds
from autotune.study.records import Role


def test_slow_starts_verify_the_leader_first_with_its_rounds():
    """nanoGPT: each launch ~15 s, none kept; 4 minutes spent one round on several candidates."""
    slow = run_costs([15.0] * 4, [])
    cands = ["leader", "second", "third", "run_cpu"]
    fit = dict(running=lambda c: False, default_running=False, costs=slow, rounds=3)
    # 3 rounds of default + leader: 90 s and the margin (5 s); of two candidates: 135 s and 5.7
    assert lineup_that_settles(cands, time_s=100.0, **fit) == ["leader"]
    assert lineup_that_settles(cands, time_s=140.0, **fit) == ["leader"]
    assert lineup_that_settles(cands, time_s=141.0, **fit) == ["leader", "second"]
    assert lineup_that_settles(cands, time_s=300.0, **fit) == cands
    # not even the leader's 3 rounds fit: the leader alone, with the rounds that do
    assert lineup_that_settles(cands, time_s=40.0, **fit) == ["leader"]
    # windows of running launches: 3.3 s each, all fit
    warm = run_costs([8.0] * 4, [3.3] * 6)
    assert lineup_that_settles(cands, time_s=60.0, running=lambda c: True, default_running=True,
                               costs=warm, rounds=3) == cands
    # nothing priced yet: all of them, as before
    assert lineup_that_settles(cands, time_s=1.0, running=lambda c: False,
                               default_running=False, costs=None, rounds=3) == cands


def _v(config: Config, role: str, thr: tuple[float, ...], base: tuple[float, ...]) -> Verified:
    return Verified(config=config, role=role, search_throughput=thr[0], throughputs=thr,
                    baselines=base)


def _accept(why: str = "same math", ok: bool = True):
    def accept(config):
        return QualityVerdict(status=QualityStatus.WITHIN if ok else QualityStatus.NOT_SHOWN,
                              math_class="x", why=why)
    return accept


def test_a_faster_reference_that_holds_up_is_the_recommendation():
    base = (100.0, 100.0, 100.0)
    pick = _v(Config(threads=2), Role.SEARCH, (130.0, 128.0, 131.0), base)
    run_cpu = _v(Config(nproc=2), Role.RUN_CPU, (140.0, 139.0, 141.0), base)
    assert is_reference(Role.RUN_CPU) and not is_reference(Role.DEFAULT)
    assert is_reference("reference:default_compiled") and not is_reference(Role.SEARCH)
    assert round(over(pick, run_cpu), 3) == round(130.0 / 140.0, 3)
    chosen, lines = reference_check(pick, [pick, run_cpu], _accept(), lambda r: "run_cpu's")
    assert chosen is run_cpu and lines == []
    # a slower reference changes nothing
    slow = _v(Config(nproc=2), Role.RUN_CPU, (120.0, 121.0, 119.0), base)
    assert reference_check(pick, [pick, slow], _accept(), str) == (pick, [])


def test_a_faster_reference_not_recommended_is_named_with_why():
    base = (100.0, 100.0, 100.0, 100.0)
    pick = _v(Config(threads=2), Role.SEARCH, (130.0, 128.0, 131.0, 129.0), base)
    ref = _v(Config(compile=True), "reference:default_compiled", (140.0, 139.0, 141.0, 138.0),
             base)
    chosen, lines = reference_check(pick, [pick, ref], _accept("drop 2 pp", ok=False),
                                    lambda r: "the default compiled")
    assert chosen is pick
    assert lines == ["the default compiled ran 1.08x the pick over 4 round(s), but its accuracy "
                     "was not accepted (drop 2 pp)"]
    # one that does not hold up against the default launch in 3 of 4 rounds
    pick = _v(Config(threads=2), Role.SEARCH, (103.0, 103.0, 103.0, 103.0), base)
    shaky = _v(Config(nproc=2), Role.RUN_CPU, (140.0, 99.0, 140.0, 99.5), base)
    assert pick.holds and not shaky.holds and over(pick, shaky) < 1.0
    chosen, lines = reference_check(pick, [pick, shaky], _accept(), lambda r: "run_cpu's")
    assert chosen is pick and "did not hold up against the default launch" in lines[0]


def test_a_confirmation_leaves_the_settling_rounds_what_the_search_kept_for_them(tmp_path):
    """The README's first command, on a fresh clone: the search kept 34 s for the rounds that
    settle the winner's ratio (windows of two kept launches) and 79 s for bf16's confirmation;
    with 117 s left the confirmation priced those rounds as starts (75 s), did not run, and the
    winner fell to run_cpu's settings at 1.42x against bf16's 2.42x, 58 s unused. The two now
    price them alike, whether the default's launch runs or not."""
    from types import SimpleNamespace

    from autotune.quality.evidence import QualityBook
    from autotune.recommend.choose import _confirmation
    from autotune.result import Outcome, TrialResult
    from autotune.search.budget import SETTLE_ROUNDS, verify_reserve
    from autotune.study.records import Record
    from autotune.study.storage import open_storage, open_study

    costs = run_costs([7.5, 7.2, 8.0, 7.8], [3.4] * 8)
    kept = verify_reserve(costs=costs, running=[True, False], confirm_s=0.0, rounds=3,
                          floor_s=0.0, budget_s=600.0)
    assert kept.settle_s == 2 * SETTLE_ROUNDS * 3.4
    book = QualityBook(open_study(open_storage(f"sqlite:///{tmp_path}/q.db"), "q"),
                       lambda *a, **k: None, batchnorm=True, tolerance_pp=1.0)
    default = Record(config=Config(), role=Role.DEFAULT, feasible=True,
                     result=TrialResult(outcome=Outcome.OK, throughput=1000.0, seconds=7.5))
    result = SimpleNamespace(book=book, costs=costs, records=[default])
    confirm = _confirmation(result, default, lambda: 117.0, progress=None)
    assert confirm.leave_s == kept.settle_s
    # no costs measured: a trial's seconds, start included, per run, as before
    assert _confirmation(SimpleNamespace(book=book, costs=None, records=[default]), default,
                         lambda: 117.0, progress=None).leave_s == 2 * SETTLE_ROUNDS * 7.5
    # a 2-minute search keeps the 3 rounds nearest to 15% of it (18 s, a round 6.8 s), and
    # the confirmation leaves those 3, not SETTLE_ROUNDS (34 s)
    short = verify_reserve(costs=costs, running=[True, False], confirm_s=0.0, rounds=3,
                           floor_s=0.0, budget_s=120.0)
    assert round(short.settle_s, 6) == round(2 * 3 * 3.4, 6)
    result = SimpleNamespace(book=book, costs=costs, records=[default],
                             settle_rounds=settling_rounds(costs, 120.0, SETTLE_ROUNDS))
    assert _confirmation(result, default, lambda: 117.0, progress=None).leave_s == short.settle_s
    # one that kept none leaves none
    result.settle_rounds = 0
    assert _confirmation(result, default, lambda: 117.0, progress=None).leave_s == 0.0


def _look_after_rounds(tmp_path, name: str, run_cpu_ratios: tuple[float, ...]) -> int:
    """A verification of bf16 (2.0x, quiet) and run_cpu's settings (`run_cpu_ratios`) over 3
    rounds of 3.3 s windows, then bf16's confirmation: the pairs its look planned. Quality runs
    are a table (8 s fp32, 6 s bf16; bf16's screening drops 0, 1 and 0.2 pp), time a clock."""
    from types import SimpleNamespace

    from autotune.progress import SILENT
    from autotune.quality.evidence import QualityBook
    from autotune.recommend.choose import _confirmation
    from autotune.recommend.verify import verify
    from autotune.result import Outcome, TrialResult
    from autotune.study.records import Record
    from autotune.study.storage import open_storage, open_study

    clock = {"left": 190.0}
    drops = {0: 0.0, 1: 0.010, 2: 0.002}
    bf16 = Config(precision="bf16")
    run_cpu = Config(binding="numactl", allocator="tcmalloc", omp_runtime="libiomp5")

    def quality(config, mode, *, seed=0, samples=None):
        seconds = 6.0 if config.precision == "bf16" else 8.0
        clock["left"] -= seconds
        q = 0.9 + 0.002 * (seed % 5) - (drops.get(seed, 0.0) if config.precision == "bf16"
                                        else 0.0)
        return TrialResult(outcome=Outcome.OK, accuracy=q, seconds=seconds)
    book = QualityBook(open_study(open_storage(f"sqlite:///{tmp_path}/{name}.db"), "q"),
                       quality, batchnorm=True, tolerance_pp=1.0)
    book.fix_length(8192)
    book.measure(Config())
    book.measure(bf16)
    rounds = {"n": 0}

    def throughput(config, mode):
        clock["left"] -= 3.3
        if config == Config():
            rounds["n"] += 1
            return TrialResult(outcome=Outcome.OK, throughput=100.0, seconds=3.3)
        ratio = 2.0 if config == bf16 else run_cpu_ratios[(rounds["n"] - 1) % len(run_cpu_ratios)]
        return TrialResult(outcome=Outcome.OK, throughput=100.0 * ratio, seconds=3.3)

    def rec(config, role, thr):
        return Record(config=config, role=role, feasible=True,
                      result=TrialResult(outcome=Outcome.OK, throughput=thr, seconds=7.5))
    default = rec(Config(), Role.DEFAULT, 100.0)
    result = SimpleNamespace(book=book, costs=run_costs([7.5] * 4, [3.3] * 8),
                             records=[default])
    confirm = _confirmation(result, default, lambda: clock["left"], progress=SILENT)
    verify([rec(bf16, Role.SEARCH, 200.0), rec(run_cpu, Role.RUN_CPU, 126.0)], default,
           throughput, rounds=3, max_rounds=12, time_left=lambda: clock["left"],
           accept=confirm.verdict, keep_s=lambda: confirm.reserve([bf16]),
           rounds_after=confirm.rounds_after)
    ev = book.evidence(bf16)
    return max(int(r.get("plan") or 0) for s, r in ev.runs.items() if s >= 100)


def test_a_look_leaves_only_the_rounds_the_winner_still_needs(tmp_path):
    """A 5-minute search's bf16 look was held to 4 pairs (bound 1.19 pp, not shown) by 5 rounds
    kept for settling ratios that had settled in the asked 3; 40 s went to rounds of a settled
    figure. Settled ratios (both bf16's and the fallback's) leave the look the time: 118 s
    after verification hold 8 pairs of 14 s (less a 5% margin; 6 with 5 rounds kept). A
    fallback that needs more rounds than were kept gets what was kept, never more: the look
    plans the 6 pairs it planned before (one 5-minute search left its look no time at all)."""
    settled = _look_after_rounds(tmp_path, "settled", (1.26, 1.27, 1.25))
    assert settled == 8
    shaky = _look_after_rounds(tmp_path, "shaky", (1.05, 1.45, 1.2))
    assert shaky == 6 >= LEAST_LOOK_PAIRS


def test_a_reference_left_out_for_time_is_named_when_it_measured_as_fast_as_the_pick():
    """A 4-minute search of a script whose launch takes 20 s (23:32 UTC, 2026-11-29) verified only
    its leader, a sampled trial at 1.08x in the search against run_cpu's settings' 1.07x; the
    leader settled at 1.00x and the summary recommended the default launch without a word of
    run_cpu's settings. They are named now, with what measures them."""
    from types import SimpleNamespace

    from autotune.progress import SILENT
    from autotune.recommend.choose import recommend
    from autotune.recommend.references import left_out
    from autotune.recommend.words import recommendation_lines
    from autotune.result import Outcome, TrialResult
    from autotune.study.records import Record

    clock = {"left": 175.0}
    leader = Config(binding="numactl", allocator="tcmalloc")
    run_cpu = Config(binding="numactl", allocator="tcmalloc", omp_runtime="libiomp5")

    def evaluate(config, mode, **_):
        clock["left"] -= 20.0          # a start each: a script keeps no launch
        thr = {Config(): 100.0, leader: 100.5}.get(config, 104.0)
        return TrialResult(outcome=Outcome.OK, throughput=thr, seconds=20.0)

    def rec(config, role, thr):
        return Record(config=config, role=role, feasible=True,
                      result=TrialResult(outcome=Outcome.OK, throughput=thr, seconds=20.0))
    default = rec(Config(), Role.DEFAULT, 100.0)
    result = SimpleNamespace(default=default, book=None, stop_reason="budget",
                             costs=run_costs([20.0] * 4, []),
                             records=[default, rec(run_cpu, Role.RUN_CPU, 107.0),
                                      rec(leader, Role.SEARCH, 108.0)])
    got = recommend(result, evaluate, rounds=3, script_mode=True,
                    time_left=lambda: clock["left"], progress=SILENT, max_rounds=12)
    assert [c.role for c in got.candidates] == [Role.SEARCH] and got.config == Config()
    named = ("run_cpu's settings measured 1.07x the default launch in the search (one run) and "
             "were not verified: the time left held the rounds of 1 candidate; `autotune verify` "
             "measures the search's best candidates again")
    assert got.extra["references"] == [named]
    assert f"  {named}" in recommendation_lines(got.to_json())
    # slower in the search than the verified pick: nothing to say
    assert left_out([(Role.RUN_CPU, 1.07)], kept=1, speedup=2.4) == []
    assert left_out([("reference:default_compiled", 1.5)], kept=2, speedup=1.2) == [
        "the default compiled reference measured 1.50x the default launch in the search (one "
        "run) and was not verified: the time left held the rounds of 2 candidates; `autotune "
        "verify` measures the search's best candidates again"]


def test_the_rounds_past_the_asked_ones_go_to_the_reference_that_will_be_recommended():
    """A 2-minute search (Zen 5, 2026-11-30): after 3 rounds the default compiled led on its
    ratio to the default launch (1.52x against run_cpu's 1.50x), but run_cpu's settings ran
    faster than it in the same rounds (it ran 0.99x of them), so run_cpu's were the recommendation whatever
    the default compiled's 7 more rounds showed, and its figure stayed a 3-round lower bound.
    The more rounds now go to the reference that is recommended, and settle its figure."""
    from autotune.recommend.verify import verify
    from autotune.result import Outcome, TrialResult
    from autotune.study.records import Record

    compiled = Config(compile=True)
    run_cpu = Config(binding="numactl", allocator="tcmalloc", omp_runtime="libiomp5")
    asked = {compiled: (160.0, 137.0, 152.0), run_cpu: (150.0, 138.0, 158.0)}
    later = {compiled: 140.0, run_cpu: 149.0}
    measured: dict[Config, int] = {}

    def throughput(config, mode):
        n = measured[config] = measured.get(config, 0) + 1
        thr = 100.0 if config == Config() else (asked[config][n - 1] if n <= 3
                                                 else later[config] + (n % 2))
        return TrialResult(outcome=Outcome.OK, throughput=thr, seconds=3.0)

    def rec(config, role, thr):
        return Record(config=config, role=role, feasible=True,
                      result=TrialResult(outcome=Outcome.OK, throughput=thr, seconds=7.0))
    got = verify([rec(compiled, "reference:default_compiled", 150.0),
                  rec(run_cpu, Role.RUN_CPU, 155.0)], rec(Config(), Role.DEFAULT, 100.0),
                 throughput, rounds=3, max_rounds=12, accept=_accept())
    assert got.config == run_cpu
    assert measured[run_cpu] > 3 and measured[compiled] == 3
    assert got.rounds == measured[Config()] == measured[run_cpu]
    assert got.settling is not None and got.settling.settled


class _KeptLaunches:
    """An evaluator that keeps launches as run/warm.py does: a config's first run starts it
    (8 s), every later one is a window of it (3.5 s); `left` is the budget's clock."""

    def __init__(self, ratios: dict, left: float):
        from autotune.result import Outcome, TrialResult
        self.ratios, self.left, self.up = ratios, left, set()
        self.n: dict = {}
        self._result = lambda thr, s: TrialResult(outcome=Outcome.OK, throughput=thr, seconds=s)

    def running(self, config) -> bool:
        return config in self.up

    def __call__(self, config, mode):
        seconds = 3.5 if config in self.up else 8.0
        self.up.add(config)
        self.left -= seconds
        n = self.n[config] = self.n.get(config, 0) + 1
        ratios = self.ratios.get(config, (1.0,))
        return self._result(100.0 * ratios[(n - 1) % len(ratios)], seconds)


def test_the_rounds_past_the_asked_ones_are_priced_as_the_windows_they_will_be():
    """A 10-minute search (Zen 5, 2026-11-30) asked 26 s for an eighth round of two 3.5 s
    windows, priced from the first round's starts (13 s, twice over while unsettled), and ended
    with its ratio a lower bound and 21 s unused. With 25 s left after 3 asked rounds whose
    first was two 8 s starts, the next rounds are priced as windows (7 s): two more run, where
    pricing them at 16 s ran none. A launch no longer running is priced as before."""
    from autotune.recommend.verify import verify
    from autotune.result import Outcome, TrialResult
    from autotune.study.records import Record

    bf16 = Config(precision="bf16", compile=True)

    def rec(config, role, thr):
        return Record(config=config, role=role, feasible=True,
                      result=TrialResult(outcome=Outcome.OK, throughput=thr, seconds=8.0))

    def run(ev):
        # 3 asked rounds take 8+8, 3.5+3.5, 3.5+3.5 = 30 s: 25 s left after them
        return verify([rec(bf16, Role.SEARCH, 220.0)], rec(Config(), Role.DEFAULT, 100.0), ev,
                      rounds=3, max_rounds=12, time_left=lambda: ev.left)
    noisy = {bf16: (2.0, 2.4, 1.7, 2.1, 2.2)}      # unsettled after 3 rounds
    kept = _KeptLaunches(noisy, left=55.0)
    assert run(kept).rounds == 5 and kept.n[bf16] == 5
    assert 4.0 <= kept.left < 7.0 * 2             # stopped when two windows' rounds no longer fit

    class Closing(_KeptLaunches):                  # launches closed between rounds: starts
        def running(self, config):
            return False
    closed = Closing(noisy, left=55.0)
    assert run(closed).rounds == 3
