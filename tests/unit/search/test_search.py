"""The search loop and verification, driven by a deterministic evaluator and a simulated clock.

The loop takes its evaluator as a value (real trials in production, a recorded landscape in the
benchmarks); here it is a formula, so every assertion is exact. Storage is a real SQLite file.
"""
from __future__ import annotations

import dataclasses
import itertools
import random
from pathlib import Path

import optuna
import pytest

from autotune.result import Outcome, TrialResult
from autotune.config import Config
from autotune.progress import Silent
from autotune.errors import WorkloadError
from autotune.probe import probe
from autotune.quality.math_class import math_class
from autotune.recommend.verify import verify
from autotune.search.budget import SETTLE_ROUNDS, verify_reserve
from autotune.search.reserve import run_costs
from autotune.search.lineup import pick_candidates
from autotune.search.loop import run_search
from autotune.search.options import SearchOptions
from autotune.search.references import (STARTUP_TRIALS, launchable_draw, make_sampler,
                                        reference_configs)
from autotune.study.records import Role, records
from autotune.space.resolve import find_space, load_space, parse_space, resolve
from autotune.study.storage import open_storage, open_study
from autotune.probe.topology import Capabilities
from two_core import space, topo  # noqa: F401 - fixtures: a 2-core machine and its space



class Sim:
    """A machine where bf16, two ranks and tcmalloc help, batch 64 costs accuracy."""

    def __init__(self, trial_s: float = 10.0, noise: dict | None = None):
        self.t = 0.0
        self.trial_s = trial_s
        self.calls: list[tuple[str, str]] = []
        self.configs: list[tuple[Config, str]] = []
        self.quality: list[tuple[str, int]] = []      # (math class, seed) of each quality run
        self.noise = noise or {}

    def elapsed(self) -> float:
        return self.t

    def speed(self, c: Config) -> float:
        s = 100.0 * (1.6 if c.precision == "bf16" else 1.0) * (1.08 if c.allocator == "tcmalloc" else 1.0)
        s *= {1: 1.0, 2: 1.3}[c.nproc] * (1.0 if c.threads in (None, 2 // c.nproc) else 0.6)
        s *= {32: 1.0, 64: 1.1, 128: 1.2}[c.global_batch]
        return s * (1.04 if c.binding != "none" else 1.0)

    def __call__(self, c: Config, mode: str, seed: int = 0,
                 samples: int | None = None) -> TrialResult:
        self.calls.append((c.key(), mode))
        self.configs.append((c, mode))
        self.t += self.trial_s
        if mode == "accuracy":
            self.quality.append((math_class(c, batchnorm=True), seed))
            # seed-to-seed noise of 0.2 points around a mean that falls with the global batch
            noise = (0.0, 0.002, -0.002)[seed % 3]
            return TrialResult(outcome=Outcome.OK, accuracy=0.80 - 0.0001 * c.global_batch + noise,
                               seconds=self.trial_s)
        factor = self.noise.pop(c.key(), 1.0) if self.noise else 1.0
        return TrialResult(outcome=Outcome.OK, throughput=self.speed(c) * factor, seconds=self.trial_s)


def new_study(tmp_path, name="s"):
    return open_study(open_storage(f"sqlite:///{tmp_path}/study.db"), name, sampler=make_sampler(0))


def test_references_first_never_twice_accuracy_once_per_math(tmp_path, topo, space):
    sim = Sim()
    study = new_study(tmp_path)
    # quality runs of 2048 samples: at this machine's 100-280 samples/s the floor's and a
    # class's seeds fit the budget left when bf16 first contends (the search counts both now)
    res = run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
                     options=SearchOptions(budget_s=600, min_trial_s=10, patience=100,
                                           quality_samples=2048))
    thr = [k for k, mode in sim.calls if mode == "throughput"]
    assert thr[0] == Config().key()
    assert thr[1] == reference_configs(topo, Config())[1][1].key()
    assert len(thr) == len(set(thr)), "a configuration ran twice"
    # the noise floor (3 seeds of the default's math) comes first among the quality runs: when a
    # class that changes the math first contends for the lead, not before the second trial
    assert sim.quality[:3] == [(math_class(Config(), batchnorm=True), s) for s in (0, 1, 2)], \
        "the noise floor (3 seeds of the default launch) comes first"
    first_quality = next(i for i, (_, mode) in enumerate(sim.calls) if mode == "accuracy")
    assert [m for _, m in sim.calls[:first_quality]].count("throughput") >= 3
    assert len(sim.quality) == len(set(sim.quality)), "a (math class, seed) measured twice"
    assert res.stop_reason == "budget" and sim.t <= 600
    roles = {r.role for r in records(study)}
    assert {Role.DEFAULT, Role.RUN_CPU, "search"} <= roles


def test_infeasible_configs_are_recorded_with_a_violated_constraint_not_run(tmp_path, topo, space):
    sim = Sim()
    study = new_study(tmp_path)
    run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
               options=SearchOptions(budget_s=900, min_trial_s=10, patience=100))
    ruled_out = [t for t in study.trials if t.user_attrs.get("outcome") == Outcome.INFEASIBLE]
    assert ruled_out, "a 2-core space with threads x nproc combinations has infeasible points"
    for t in ruled_out:
        assert t.constraints["feasible"] > 0 and t.system_attrs["constraints"] == [1.0]
        assert t.user_attrs["config_key"] not in {k for k, _ in sim.calls}
        assert "exceeds" in t.user_attrs["reason"] or "violates" in t.user_attrs["reason"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_sampler_start_up_is_drawn_from_launchable_configs(tmp_path, topo, space, seed):
    """A quarter of this 2-core grid cannot run (2 ranks x 2 threads), so six uniform draws would
    all run with odds of 0.75**6 = 18%; three seeds passing by chance, 0.6%."""
    sim = Sim()
    study = open_study(open_storage(f"sqlite:///{tmp_path}/study.db"), "s",
                       sampler=make_sampler(seed))
    run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
               options=SearchOptions(budget_s=10**6, min_trial_s=10, seed=seed, guide="none",
                                     max_trials=2 + STARTUP_TRIALS))
    search = [t for t in study.trials if t.user_attrs.get("role") == "search"]
    assert len(search) == STARTUP_TRIALS
    assert all(t.user_attrs["outcome"] == Outcome.OK for t in search)
    assert len({t.user_attrs["config_key"] for t in search}) == STARTUP_TRIALS


def test_a_launchable_draw_gives_up_when_nothing_can_run(space):
    assert launchable_draw(space, random.Random(0), seen=lambda p: False,
                           ruled_out=lambda p: "nothing runs here", tries=50) is None
    seen = launchable_draw(space, random.Random(0), seen=lambda p: p["precision"] == "fp32")
    assert seen is not None and seen["precision"] == "bf16"


def test_a_repeat_row_mirrors_the_measurement_it_reuses(tmp_path, topo):
    """Two configurations and a sampler that keeps proposing them: the repeat rows carry the
    original's measurement whole (a script's metric as printed too), and where it came from."""
    tiny = resolve(parse_space("name: tiny\nknobs:\n  allocator: [default, tcmalloc]\n",
                               source="tiny.yaml"), topo)

    def evaluate(c: Config, mode: str, seed: int = 0, samples: int | None = None) -> TrialResult:
        sim.t += 10.0
        if mode == "accuracy":
            return TrialResult(outcome=Outcome.OK, accuracy=0.8, seconds=10.0)
        return TrialResult(outcome=Outcome.OK, throughput=1 / (0.3 if c.allocator == "tcmalloc" else 0.4),
                           seconds=10.0, cpu_share=0.97, metric_source="--metric",
                           metric_shown=f"{0.3 if c.allocator == 'tcmalloc' else 0.4} "
                                        "(--metric, lower is better)")
    sim = Sim()
    study = new_study(tmp_path)
    run_search(study, space=tiny, topology=topo, evaluate=evaluate, clock=sim,
               options=SearchOptions(budget_s=10**6, min_trial_s=10, patience=100))
    by_number = {t.number: t for t in study.trials}
    repeats = [t for t in study.trials if t.user_attrs.get("role") == "repeat"]
    assert repeats, "the sampler proposed a measured configuration at least once"
    for t in repeats:
        original = by_number[t.user_attrs["reused_from"]]
        assert t.values == original.values
        for field in ("outcome", "metric_shown", "metric_source", "cpu_share", "config_key"):
            assert t.user_attrs[field] == original.user_attrs[field], field


def test_resume_runs_nothing_already_measured(tmp_path, topo, space):
    sim = Sim()
    study = new_study(tmp_path)
    run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
               options=SearchOptions(budget_s=200, min_trial_s=10, patience=100,
                                     quality_samples=500))
    first = {k for k, m in sim.calls if m == "throughput"}
    sim2 = Sim()
    again = new_study(tmp_path)  # same storage, same name: resumed
    run_search(again, space=space, topology=topo, evaluate=sim2, clock=sim2,
               options=SearchOptions(budget_s=200, min_trial_s=10, patience=100,
                                     quality_samples=500))
    second = {k for k, m in sim2.calls if m == "throughput"}
    assert first and second and not first & second
    assert sim.quality and not set(sim.quality) & set(sim2.quality)  # stored and reused


def test_stagnation_stops_early_and_the_best_is_found(tmp_path, topo, space):
    sim = Sim()
    study = new_study(tmp_path)
    # stagnation may stop a search only after half its budget (SearchOptions.stagnation_after):
    # a budget of 120 trials of 10 s, which the space does not exhaust first
    res = run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
                     options=SearchOptions(budget_s=1200, min_trial_s=10, patience=15))
    assert res.stop_reason == "stagnated", res.stop_reason
    assert 600 <= sim.elapsed() < 1200
    best = max(r.throughput for r in res.records if r.feasible)
    oracle = max(sim.speed(space.to_config(p)) for p in space.grid() if not space.violations(p))
    assert best >= 0.95 * oracle


class NoisySim(Sim):
    """A Sim whose quality runs report the gradient noise scale a real worker's probe gives:
    |G|^2 = 1 and tr(S) = 20 per sample, so B_noise = 20 samples."""

    def __call__(self, c: Config, mode: str, seed: int = 0, samples: int | None = None):
        res = super().__call__(c, mode, seed=seed, samples=samples)
        if mode != "accuracy":
            return res
        return dataclasses.replace(res, gns={"small": 16, "big": 32, "small_sq": [1 + 20 / 16],
                                             "big_sq": [1 + 20 / 32]})


def test_a_batch_whose_predicted_goodput_is_below_the_default_gets_no_quality_runs(
        tmp_path, topo, space):
    """Issue 50, item 3: with B_noise = 20, global batch 64 keeps (20 + 32) / (20 + 64) = 0.62 of
    a sample's worth and 128 keeps 0.35. A launch of either whose throughput times that is below
    the default launch's 100 samples/s is not worth quality runs, and its trial line says so; one
    above it is measured as before (the prediction never claims accuracy)."""
    from autotune.quality.goodput import efficiency
    sim = NoisySim()
    study = new_study(tmp_path)
    res = run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
                     options=SearchOptions(budget_s=1500, min_trial_s=10, patience=100,
                                           max_accuracy_drop=0.5))
    measured = {cls for cls, _ in sim.quality}
    unworthy = [r for r in res.records if r.result.quality_verdict
                and r.result.quality_verdict.startswith("not worth quality runs")]
    assert unworthy, "no batch fell below the default's goodput in this Sim"
    for r in unworthy:
        assert r.result.quality == "not shown" and not r.feasible
        assert r.throughput * efficiency(20.0, r.config.global_batch, 32) < 100.0
        assert f"at global batch {r.config.global_batch}, gradient noise scale ~20)" in \
            r.result.quality_verdict
    # a class predicted unworthy at every launch measured was never given a quality run
    worthy = {r.result.math_class for r in res.records if r.result.quality != "not shown"
              or r not in unworthy}
    assert not ({r.result.math_class for r in unworthy} - worthy) & measured


class UnshownSim(Sim):
    """bf16 loses 1.8, 0.6 and 1.5 points on seeds 0, 1, 2 (its confirmation's seeds 1.3 each):
    a mean of 1.3 pp, past 1 pp, yet not shown beyond it on three seeds."""
    BF16_DROP = {0: 0.018, 1: 0.006, 2: 0.015}

    def __call__(self, c: Config, mode: str, seed: int = 0, samples: int | None = None):
        res = super().__call__(c, mode, seed=seed, samples=samples)
        if mode == "accuracy" and c.precision == "bf16":
            res = dataclasses.replace(res, accuracy=res.accuracy - self.BF16_DROP.get(seed, 0.013))
        return res


def test_the_fastest_class_not_shown_is_named_beside_the_recommendation(tmp_path, topo, space):
    """Issue 50, item 5: bf16 is the fastest class, and its runs do not show it within 1 pp; the
    recommendation is the fastest launch that is shown, and bf16 is named with its speed in the
    search, its verdict, and that no number of seeds would show it (its drop is past 1 pp)."""
    from autotune.quality.verdict import recommendation_claims
    from autotune.recommend.choose import recommend
    sim = UnshownSim()
    study = new_study(tmp_path)
    res = run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
                     options=SearchOptions(budget_s=1500, min_trial_s=10, patience=100,
                                           max_accuracy_drop=1.0))
    bf16 = [r for r in res.records
            if r.result.math_class == "global_batch=32,precision=bf16,bn_batch=32"]
    assert bf16 and all(r.result.quality == "not shown" and not r.feasible for r in bf16)
    rec = recommend(res, sim, rounds=2, script_mode=False, time_left=lambda: 1000.0,
                    progress=Silent())
    assert rec.config.precision == "fp32" and rec.speedup > 1.0
    claims = recommendation_claims(rec.to_json())
    named = [c for c in claims if c.startswith("faster, accuracy not shown: ")]
    assert len(named) == 1 and "precision=bf16" in named[0] and "in the search" in named[0]
    # (its seed 0 loses 1.8 pp where the default's seeds spread by under 0.2: a spike too)
    assert "; accuracy on the search's seeds: not shown within 1 pp" in named[0]
    assert named[0].endswith("no number of paired seeds would show it within the tolerance")


def test_accuracy_tolerance_excludes_configs_that_lose_too_much(tmp_path, topo, space):
    sim = Sim()
    study = new_study(tmp_path)
    res = run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
                     options=SearchOptions(budget_s=1500, min_trial_s=10, patience=100,
                                           max_accuracy_drop=0.5))
    # default 0.7968 ± 0.002 (global batch 32). Paired seed by seed (each seed's noise is the
    # same on both sides), global batch 64 loses 0.32 pp on every seed: within 0.5 pp; 128
    # loses 0.96 pp: beyond.
    judged = [r for r in res.records if r.outcome == Outcome.OK
              and r.result.quality in ("within", "beyond")]
    assert {r.config.global_batch for r in judged} == {32, 64, 128}
    for r in judged:
        assert r.feasible == (r.config.global_batch <= 64), r.config
        assert r.result.quality_n == 3


def test_a_workload_that_fails_at_once_stops_the_search(tmp_path, topo, space):
    calls = []

    def broken(c, mode):
        calls.append(c)
        return TrialResult(outcome=Outcome.WORKLOAD_ERROR, reason="ImportError: no module named mypkg",
                           log_tail="ModuleNotFoundError: No module named 'mypkg'")
    sim = Sim()
    with pytest.raises(WorkloadError, match="mypkg"):
        run_search(new_study(tmp_path), space=space, topology=topo, evaluate=broken, clock=sim,
                   options=SearchOptions(budget_s=600))
    assert len(calls) == 1


def test_verification_recommends_only_what_holds_up(tmp_path, topo, space):
    sim = Sim()
    study = new_study(tmp_path)
    res = run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
                     options=SearchOptions(budget_s=800, min_trial_s=10, patience=100))
    cands = pick_candidates(res.records)
    assert len(cands) >= 2
    # The slowest candidate had a lucky run in the search: seen 3x faster than it really is.
    fluke = dataclasses.replace(cands[-1], result=dataclasses.replace(
        cands[-1].result, throughput=cands[0].throughput * 3))
    rec = verify([fluke] + cands[:-1], res.default, sim, rounds=3)
    assert rec.verified and rec.rounds == 3
    by_key = {v.config.key(): v for v in rec.candidates}
    assert by_key[fluke.config.key()].shrink < 0.5  # re-measured far below what the search saw
    truly_best = max(cands, key=lambda c: sim.speed(c.config))
    assert rec.config == truly_best.config
    assert rec.speedup == pytest.approx(sim.speed(rec.config) / sim.speed(Config()))
    assert rec.headline().startswith(f"verified speedup {rec.speedup:.2f}x")


def test_a_candidate_that_does_not_beat_the_default_in_most_rounds_is_not_recommended(topo):
    sim = Sim()
    default = dataclasses.replace(_rec(Config(), sim), role=Role.DEFAULT)
    lucky = _rec(Config(allocator="tcmalloc"), sim)  # truly 1.08x
    # Round 1 and 2: machine noise makes it lose to the default; round 3 it wins big (and so
    # on: an unsettled ratio makes verification go on past the 3 rounds asked).
    sim.noise = {}
    factors = itertools.cycle([0.9, 0.9, 2.0])

    def noisy(c, mode):
        ev = sim(c, mode)
        if c == lucky.config:
            return dataclasses.replace(ev, throughput=sim.speed(Config()) * next(factors))
        return ev
    rec = verify([lucky], default, noisy, rounds=3)
    assert rec.config == Config() and "lower quartile" in rec.note
    assert rec.rounds > 3


def test_two_rounds_with_one_lost_do_not_hold_up(topo):
    """The first real GPU search (H200, 2026-11-26) verified torchrun's --numa-binding=node
    heuristic in 2 rounds at 0.93x and 1.34x the default launch; the quartiles of two ratios
    interpolate to q1 = 1.03, so it 'held', and the search recommended it as "faster than the
    default launch" over a range that includes 1.0. Losing one round in two holds nothing."""
    sim = Sim()
    default = dataclasses.replace(_rec(Config(), sim), role=Role.DEFAULT)
    heuristic = _rec(Config(allocator="tcmalloc"), sim)
    sim.noise = {}
    factors = iter([0.9329, 1.3361])

    def measured(c, mode):
        ev = sim(c, mode)
        if c == heuristic.config:
            return dataclasses.replace(ev, throughput=sim.speed(Config()) * next(factors))
        return dataclasses.replace(ev, throughput=sim.speed(Config()))
    rec = verify([heuristic], default, measured, rounds=2, max_rounds=2)
    assert rec.rounds == 2 and rec.candidates[0].ratio.q1 > 1.0
    assert not rec.candidates[0].holds
    assert rec.config == Config() and rec.headline().startswith("no verified speedup")


def test_verification_interleaves_default_and_candidates(topo):
    sim = Sim()
    default = dataclasses.replace(_rec(Config(), sim), role=Role.DEFAULT)
    a = _rec(Config(precision="bf16"), sim)
    b = _rec(Config(allocator="tcmalloc"), sim)
    sim.calls.clear()
    verify([a, b], default, sim, rounds=2)
    order = [k for k, _ in sim.calls]
    d, ka, kb = default.config.key(), a.config.key(), b.config.key()
    assert order == [d, ka, kb, kb, ka, d]


def test_no_candidate_beating_the_default_recommends_the_default(topo):
    sim = Sim()
    default = dataclasses.replace(_rec(Config(), sim), role=Role.DEFAULT)
    slow = _rec(Config(threads=1), sim)
    rec = verify([slow], default, sim, rounds=2)
    assert rec.config == Config() and rec.speedup == 1.0
    assert rec.headline().startswith("no verified speedup")


def _rec(config, sim):
    from autotune.study.records import Record
    return Record(config=config, feasible=True, role="search",
                  result=TrialResult(outcome=Outcome.OK, throughput=sim.speed(config), accuracy=0.8))


def test_a_candidate_at_most_half_the_leaders_speed_is_not_verified(topo):
    """Three rounds of a candidate that cannot win are three launches lost; run_cpu stays in for
    the report's comparison with it however far behind it is."""
    sim = Sim()
    leader = _rec(Config(precision="bf16", allocator="tcmalloc"), sim)        # 172.8/s
    close = _rec(Config(precision="bf16"), sim)                               # 160/s
    far = _rec(Config(threads=1), sim)                                        # 60/s: 35%
    run_cpu = dataclasses.replace(_rec(Config(nproc=2, threads=1), sim), role=Role.RUN_CPU)
    assert far.throughput < 0.5 * leader.throughput < close.throughput
    assert pick_candidates([far, close, leader]) == [leader, close]
    assert pick_candidates([far, run_cpu, leader]) == [leader, run_cpu]
    assert pick_candidates([far]) == [far]      # the leader itself always goes on


def test_the_search_keeps_back_verification_rounds_for_its_lineup_only(tmp_path, topo, space):
    """A search with minute-long trials keeps rounds x (default + candidates) x trial length for
    verification: a far slower candidate adds none (with a fixed four, a 30-minute search with
    60 s trials kept 12 minutes back and stopped a launch short of its goal on the Ice Lake model;
    docs/search-at-scale.md)."""
    from autotune.search.loop import _Search
    from autotune.study.records import record_trial
    sim = Sim(trial_s=60.0)
    study = new_study(tmp_path)

    def measured(config, role="search"):
        record_trial(study, config=config, role=role, result=TrialResult(
            outcome=Outcome.OK, throughput=sim.speed(config), accuracy=0.8, seconds=60.0))

    measured(Config(), Role.DEFAULT)
    measured(Config(precision="bf16", allocator="tcmalloc"))     # 172.8/s: the leader
    measured(Config(threads=1))                                   # 60/s: not verified

    def reserve():
        search = _Search(study, space=space, topology=topo, evaluate=sim, clock=sim,
                         options=SearchOptions(budget_s=1800), progress=Silent(),
                         lock=None, deadline=None)
        search.durations = search.starts = [60.0]
        kept = search.reserved()
        return kept.total_s - kept.margin_s   # the margin is the spread's (test_reserve.py)

    # default + leader, 3 rounds of 60 s; and the rounds that settle the winner's ratio
    # (SETTLE_ROUNDS of two), the whole rounds that fit in 15% of the budget whatever the
    # lineup: 2 rounds of two 60 s starts in 270 s
    settling = 2 * 60.0 * min(SETTLE_ROUNDS, int(0.15 * 1800 // (2 * 60.0)))
    assert settling == 240.0
    assert reserve() == 2 * 3 * 60.0 + settling
    measured(Config(precision="bf16"))           # 160/s: close, it joins
    assert reserve() == 3 * 3 * 60.0 + settling


def test_time_is_kept_only_for_confirmations_that_fit_where_they_are_kept():
    """Two confirmations when two fit in a quarter of the budget, one when it fits in 40%, none
    when none does: an 8-minute search over two hosts kept 2 minutes for a 246 s confirmation,
    which then did not fit, and ended with 2m41s of its budget unused."""
    def kept(confirm_s):
        costs = run_costs([8.0], [])
        return round(verify_reserve(costs=costs, running=[False] * 3, confirm_s=confirm_s,
                                    rounds=3, floor_s=0.0, budget_s=480.0).total_s
                     - verify_reserve(costs=costs, running=[False] * 3, confirm_s=0.0, rounds=3,
                                      floor_s=0.0, budget_s=480.0).total_s, 6)
    assert kept(50.0) == 100.0
    assert kept(100.0) == 100.0          # two would be 200 s, over a quarter of 480 s
    assert kept(171.0) == 171.0          # one, within 40% (192 s)
    assert kept(246.0) == 0.0


def test_sampler_is_optuna_tpe_multivariate():
    s = make_sampler(3)
    assert isinstance(s, optuna.samplers.TPESampler)


class Disturbed(Sim):
    """The machine of Sim, where other processes took the cores during the first run of some
    configurations (their throughput halved then, with the share the runner would measure)."""

    def __init__(self, hit: set[str]):
        super().__init__()
        self.hit = set(hit)

    def __call__(self, c: Config, mode: str, seed: int = 0, samples: int | None = None):
        res = super().__call__(c, mode, seed, samples)
        if mode != "throughput":
            return res
        if c.key() in self.hit:
            self.hit.discard(c.key())
            return dataclasses.replace(res, throughput=res.throughput / 2, outside_share=0.45)
        return dataclasses.replace(res, outside_share=0.01)


def test_a_disturbed_trial_is_measured_again_once_and_the_quieter_run_stands(tmp_path, topo, space):
    sim = Disturbed({Config().key()})
    study = new_study(tmp_path)
    res = run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
                     options=SearchOptions(budget_s=600, min_trial_s=10, patience=100))
    thr = [k for k, mode in sim.calls if mode == "throughput"]
    assert thr[:2] == [Config().key(), Config().key()], "re-measured right away"
    assert thr.count(Config().key()) == 2                  # once, not until quiet
    d = res.default.result
    assert d.throughput == sim.speed(Config()) and d.outside_share == 0.01
    assert "measured twice; in the other run other processes took 45% of the trial cores" in d.note
    stored = next(r for r in records(study) if r.role == Role.DEFAULT)
    assert stored.result.outside_share == 0.01 and "measured twice" in stored.result.note


def test_without_budget_a_disturbed_trial_stays_marked_and_never_decides_alone(tmp_path, topo, space):
    from autotune.recommend.verify import trusted_alone
    sim = Disturbed({Config().key()})
    study = new_study(tmp_path)
    # min_trial_s 10 and trials of 10 s: with 11 s of budget only the first run fits
    res = run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
                     options=SearchOptions(budget_s=11, min_trial_s=10, patience=100))
    assert [k for k, m in sim.calls if m == "throughput"] == [Config().key()]
    assert res.default.result.outside_share == 0.45 and not trusted_alone(res.default)


class ScriptSim(Sim):
    """Script mode: accuracy comes with each speed run; the default launch's varies with the
    seed (0.80, 0.81, 0.82), bf16 loses 10 points, tcmalloc 2 points."""

    def __call__(self, c: Config, mode: str, seed: int = 0, samples: int | None = None):
        res = super().__call__(c, "throughput")
        drop = (0.10 if c.precision == "bf16" else 0.0) + (0.02 if c.allocator == "tcmalloc" else 0.0)
        return dataclasses.replace(res, accuracy=0.80 + 0.01 * seed - drop, metric_source="pattern")


def test_a_scripts_accuracy_gate_has_a_noise_floor_over_seeds(tmp_path, topo, space):
    from autotune.study.attrs import SCRIPT_NOISE_FLOOR
    sim = ScriptSim()
    study = new_study(tmp_path)
    res = run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
                     options=SearchOptions(budget_s=900, min_trial_s=10, patience=100,
                                           reported_accuracy=True, accuracy_required=True,
                                           script_seeds=(0, 1, 2)))
    default = Config()
    assert sim.calls[:3] == [(default.key(), "throughput")] * 3   # reference, then seeds 1, 2
    floor = study.user_attrs[SCRIPT_NOISE_FLOOR]
    assert floor["seeds"] == [0, 1, 2] and floor["values"] == pytest.approx([0.80, 0.81, 0.82])
    assert res.default.result.quality_n == 3
    assert res.default.result.quality_sd == pytest.approx(0.01)
    by = {r.config: r for r in res.records}
    tc = next(r for c, r in by.items() if c.allocator == "tcmalloc" and c.precision == "fp32")
    bf = next(r for c, r in by.items() if c.precision == "bf16")
    # tcmalloc loses 2 pp on every seed: its one run is not shown (a bound of one run against
    # the floor's seeds is 3.4 pp wide), and it leads, so it runs the floor's other seeds and is
    # paired with them: shown beyond 1 pp. bf16's 10 pp are beyond on its one run already.
    assert tc.result.quality == "beyond" and "3 paired seeds" in tc.result.quality_verdict
    assert not tc.feasible
    assert bf.result.quality == "beyond" and not bf.feasible
    assert "one run against the default's 3 seeds" in bf.result.quality_verdict


def test_without_seeds_the_script_gate_compares_single_measurements(tmp_path, topo, space):
    sim = ScriptSim()
    study = new_study(tmp_path)
    res = run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
                     options=SearchOptions(budget_s=600, min_trial_s=10, patience=100,
                                           reported_accuracy=True, accuracy_required=True))
    assert [k for k, _ in sim.calls].count(Config().key()) == 1
    tc = next(r for r in res.records if r.config.allocator == "tcmalloc"
              and r.config.precision == "fp32")
    # one run against one: nothing shown, and a script without a seed is told what would show it
    assert tc.result.quality == "not shown" and not tc.feasible
    assert "give the script a seed" in tc.result.quality_verdict


def test_the_issues_short_budget_is_named_before_the_noise_floor_spends_it():
    from autotune.search.budget import phase_costs, too_short
    # across 2 namespace hosts: the default trial and each of 3 quality runs took about 40 s
    costs = phase_costs(spent_s=45, trial_s=40, quality_run_s=40, quality_runs=3, verify_rounds=3)
    assert costs.noise_floor_s == 120 and costs.verification_s == 240
    assert too_short(costs, 240) == ("4m is too short here: verification alone takes about 4m; "
                                     "use at least 12m")
    assert too_short(costs, 15 * 60) is None
    floor_heavy = phase_costs(spent_s=10, trial_s=5, quality_run_s=60, quality_runs=3,
                              verify_rounds=1)
    assert too_short(floor_heavy, 120).startswith("2m is too short here: the noise floor alone "
                                                  "takes about 3m; use at least 5m")


class Events(Silent):
    """The warnings and trial starts of a search, in order, as (kind, info)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict]] = []

    def warn(self, text: str) -> None:
        self.seen.append(("warn", {"text": text}))

    def trial_start(self, **info) -> None:
        self.seen.append(("trial_start", info))

    def note(self, text: str) -> None:
        self.seen.append(("note", {"text": text}))

    def quality_start(self, **info) -> None:
        self.seen.append(("quality_start", info))


def test_a_search_warns_once_at_its_first_trial_when_the_budget_is_too_short(tmp_path, topo, space):
    sim, heard = Sim(trial_s=30.0), Events()
    run_search(new_study(tmp_path), space=space, topology=topo, evaluate=sim, clock=sim,
               options=SearchOptions(budget_s=150, min_trial_s=10, patience=100),
               progress=heard)
    events = heard.seen
    warnings = [info["text"] for kind, info in events if kind == "warn"]
    assert len(warnings) == 1 and "is too short here" in warnings[0]
    assert "Going on" in warnings[0]
    starts = [i for i, (kind, _) in enumerate(events) if kind == "trial_start"]
    warned = next(i for i, (kind, _) in enumerate(events) if kind == "warn")
    assert starts[0] < warned < starts[1]          # from the first trial, before anything else
    sim, heard = Sim(trial_s=10.0), Events()
    run_search(new_study(tmp_path, "long"), space=space, topology=topo, evaluate=sim, clock=sim,
               options=SearchOptions(budget_s=1800, min_trial_s=10, patience=100),
               progress=heard)
    assert not [1 for kind, _ in heard.seen if kind == "warn"]


class Racing(Sim):
    """Sim whose speed runs end early, as the worker's would, when clearly below 95% of the
    leader they were given; it records what each run was given."""

    def __init__(self):
        super().__init__()
        self.leaders: list[tuple[Config, float | None]] = []

    def __call__(self, c, mode, seed=0, samples=None, leader=None):
        if mode == "throughput":
            self.leaders.append((c, leader))
        res = super().__call__(c, mode, seed=seed, samples=samples)
        if mode == "throughput" and leader and res.throughput < 0.95 * leader:
            self.t -= 0.6 * self.trial_s     # two of five windows run
            return dataclasses.replace(res, seconds=0.4 * self.trial_s,
                                       stopped_early=f"stopped early after 2 windows: below 95% "
                                                     f"of the leader's {leader:.1f}/s")
        return res


def test_sampled_trials_race_the_accepted_leader_and_a_stopped_one_is_never_a_candidate(
        tmp_path, topo, space):
    sim = Racing()
    res = run_search(new_study(tmp_path), space=space, topology=topo, evaluate=sim, clock=sim,
                     options=SearchOptions(budget_s=10**6, min_trial_s=10, max_trials=12,
                                           patience=100, early_stop=True, max_accuracy_drop=0.1))
    given = dict((c.key(), lead) for c, lead in sim.leaders)
    # the references always run whole: verification and the export compare with them
    assert given[res.default.config.key()] is None and given[res.run_cpu.config.key()] is None
    # each sampled run races the fastest whole measurement accepted on quality before it
    whole = []
    for c, lead in sim.leaders:
        rec = next(r for r in res.records if r.config.key() == c.key())
        if rec.role not in (Role.DEFAULT, Role.RUN_CPU):
            assert lead == pytest.approx(max(whole))
        if not rec.result.stopped_early and rec.result.quality in ("within", "not shown") \
                and rec.feasible:
            whole.append(rec.throughput)
    stopped = [r for r in res.records if r.result.stopped_early]
    assert stopped, "nothing lost clearly enough in this Sim"
    assert all(r.throughput < 0.95 * max(whole) for r in stopped)
    assert not set(map(id, stopped)) & set(map(id, pick_candidates(res.records)))
    # off: nobody races
    sim = Racing()
    run_search(new_study(tmp_path, "off"), space=space, topology=topo, evaluate=sim, clock=sim,
               options=SearchOptions(budget_s=10**6, min_trial_s=10, max_trials=12,
                                     patience=100, max_accuracy_drop=0.1))
    assert {lead for _, lead in sim.leaders} == {None}


def test_every_sampled_trial_names_its_machine_and_the_end_of_the_budget(tmp_path, topo, space):
    """Issue 34: a search on another machine fails a trial left RUNNING only after this deadline;
    without one it stayed RUNNING for ever, and a hostname cannot tell containers apart."""
    import time

    from autotune.util.process_identity import machine
    sim, study, before = Sim(), new_study(tmp_path), time.time()
    run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
               options=SearchOptions(budget_s=600, min_trial_s=10, patience=100))
    owners = [t.system_attrs["autotune:owner"] for t in study.trials
              if "autotune:owner" in t.system_attrs]
    assert owners and all(o["machine"] == machine() for o in owners)
    assert all(before + 600 <= o["deadline"] <= time.time() + 600 for o in owners)


def test_the_budget_note_counts_trials_per_number_of_hosts_and_measures_a_span_when_it_runs():
    from autotune.search.budget import budget_note, trial_costs
    costs = trial_costs({1: [20.0, 22.0, 30.0]}, hosts=2)
    assert costs == {1: (22.0, True), 2: (27.5, False)}      # 1.25x one host's, until measured
    assert budget_note(300, costs, floor_s=120, verify_s=90) == (
        "budget: 05:00 for trials after the noise floor (~2m) and verification (~2m): about 13 "
        "on 1 host (22 s each) or 10 across 2 hosts (~28 s each, estimated until one runs)")
    assert trial_costs({1: [20.0], 2: [26.0]}, hosts=2) == {1: (20.0, True), 2: (26.0, True)}
    assert trial_costs({}, hosts=2) == {}
    assert budget_note(-30, costs, floor_s=360, verify_s=120) == (
        "budget: no time left for trials after the noise floor (~6m) and verification (~2m) "
        "(one takes 22 s)")
    # one machine: no hosts to name
    assert budget_note(60, trial_costs({1: [9.0]}, hosts=1)) == \
        "budget: 01:00 for trials: about 6 trials of ~9 s"


def test_the_search_keeps_the_look_its_leaders_screening_plans():
    """A 5-minute search kept a least look (4 pairs of ~14 s) where bf16's screening planned 6;
    the look got the 4 kept and ended not shown (upper bound 2.20 pp). The planned look is kept
    where it fits in 40% of the budget, else its whole pairs that do; two least looks where they
    fit in 25% stay the floor."""
    from autotune.search.budget import confirmation_reserve
    least, pair = 56.0, 14.0
    assert confirmation_reserve(least, 300, planned_s=6 * pair) == 6 * pair
    assert confirmation_reserve(least, 300, planned_s=9 * pair) == 8 * pair   # 120 s hold 8
    assert confirmation_reserve(least, 300) == least                        # nothing planned
    assert confirmation_reserve(least, 600, planned_s=6 * pair) == 2 * least  # two least fit
    assert confirmation_reserve(least, 1800, planned_s=9 * pair) == 9 * pair  # past two least
    assert confirmation_reserve(least, 130, planned_s=6 * pair) == 0.0      # 52 s hold 3 pairs


def test_the_budget_note_names_the_confirmation_that_makes_verification_grow():
    """An 8-minute search over two hosts said "about 22 across 2 hosts", then, once its leader
    was a bf16 configuration, "no time left for trials after verification (~6m)" with no why."""
    from autotune.search.budget import budget_note, confirmation_reserve, trial_costs
    assert confirmation_reserve(100, budget_s=480) == 100    # two (200 s) pass 25% (120 s): one
    assert confirmation_reserve(50, budget_s=480) == 100     # two fit in 25%
    assert confirmation_reserve(200, budget_s=480) == 0.0    # not even one fits in 40%
    costs = trial_costs({1: [7.0], 2: [8.0]}, hosts=2)
    assert budget_note(-5, costs, floor_s=0, verify_s=360, confirm_s=150) == (
        "budget: no time left for trials after verification (~6m, ~2m of it to confirm the "
        "leader's accuracy on new seeds: it changes the math) (one takes 7 s)")


class Spanning(Sim):
    """Sim over two hosts: a trial across both costs 15 s, one on one host 10 s."""

    def __call__(self, c: Config, mode: str, seed: int = 0, samples: int | None = None,
                 leader: float | None = None) -> TrialResult:
        res = super().__call__(c.with_(nproc=c.nproc // c.nnodes, nnodes=1), mode, seed=seed,
                               samples=samples)
        if c.nnodes > 1:
            self.t += 5.0
            res = dataclasses.replace(res, seconds=15.0)
        return res


def test_a_search_across_hosts_says_what_its_budget_buys_on_each_number_of_hosts(
        tmp_path, topo, space):
    sim, heard = Spanning(), Events()
    run_search(new_study(tmp_path), space=space.across(2), topology=topo, evaluate=sim,
               clock=sim, options=SearchOptions(budget_s=1800, min_trial_s=10, patience=100,
                                                max_trials=4),
               progress=heard)
    events = heard.seen
    said = [(i, info["text"]) for i, (kind, info) in enumerate(events)
            if kind == "note" and info["text"].startswith("budget:")]
    first_quality = next(i for i, (kind, _) in enumerate(events) if kind == "quality_start")
    # at the default launch, before its noise floor: a span estimated from one host's 10 s
    assert said[0][0] < first_quality
    assert "on 1 host (10 s each) or" in said[0][1] and \
        "across 2 hosts (~12 s each, estimated until one runs)" in said[0][1]
    # once a trial spanned both hosts: its cost as measured
    assert len(said) == 2 and "across 2 hosts (15 s each)" in said[1][1]


def test_a_short_search_hands_its_confirmation_the_settling_rounds_it_kept(tmp_path, topo, space):
    """The rounds that settle the winner's ratio are counted once (search/reserve.
    settling_rounds): a 3-minute search of 10 s runs keeps the whole rounds nearest to 15% of
    its budget (27 s: one round of two runs is 20 s, so 1), and its result carries that count
    to the confirmation, which priced 5 rounds (100 s) where the search had kept 20 s."""
    from autotune.search.reserve import settling_cost, settling_rounds
    sim = Sim(trial_s=10.0)
    result = run_search(new_study(tmp_path), space=space, topology=topo, evaluate=sim,
                        clock=sim, options=SearchOptions(budget_s=180, min_trial_s=10,
                                                         patience=100), progress=Silent())
    assert result.settle_rounds == 1 < SETTLE_ROUNDS
    assert settling_cost(result.costs, result.settle_rounds).mean_s == 20.0
    # a half-hour search of the same runs keeps all SETTLE_ROUNDS (270 s hold 13 rounds)
    assert settling_rounds(result.costs, 1800.0, SETTLE_ROUNDS) == SETTLE_ROUNDS
    # and one whose round is more than twice 15% of its budget keeps none
    assert settling_rounds(result.costs, 60.0, SETTLE_ROUNDS) == 0
