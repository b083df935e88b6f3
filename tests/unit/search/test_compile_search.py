"""The compile knob in a search (issue 59): guessed early, a compile that fails is not tried
again while the search goes on eager, and the account shows the compile seconds on a line of
their own. On the simulated 2-core machine (tests/unit/search/test_search.py's Sim) with a
working C++ compiler probed."""
from __future__ import annotations

import dataclasses
import re

import pytest
from optuna.trial import TrialState

from test_search import Sim, new_study
from two_core import topo  # noqa: F401 - fixture

from autotune.config import Config
from autotune.measure.compile_cost import graph_key
from autotune.plan.launch_plan import CEILING_SECONDS
from autotune.progress import Silent
from autotune.plan.feasible import ruled_out
from autotune.result import Outcome, TrialResult
from autotune.search.account import Account, describe
from autotune.search.guide import Guide
from autotune.search.loop import run_search
from autotune.search.options import SearchOptions
from autotune.search.references import default_launch
from autotune.search.reserve import without_ceiling
from autotune.space.resolve import find_space, load_space, resolve
from autotune.study.records import Record, Role, records

FAILED = ("rank 0 exited with code 1: torch.compile failed: InvalidCxxCompiler: No working C++ "
          "compiler found in torch._inductor.config.cpp.cxx: (None, '/opt/bad/c++')")


class BrokenCompiler(Sim):
    """Compiling fails in every trial (a compiler the probe passed, that inductor cannot use);
    eager trials run as Sim's, compiled ones would run 1.5x."""

    def __call__(self, c, mode, seed=0, samples=None, **kw):
        if c.compile and mode == "throughput":
            self.calls.append((c.key(), mode))
            self.t += 5.0
            return TrialResult(outcome=Outcome.CRASH, reason=FAILED, seconds=5.0)
        return super().__call__(c, mode, seed=seed, samples=samples)


def compiling(topo):
    topo = dataclasses.replace(topo, capabilities=dataclasses.replace(
        topo.capabilities, cxx_compiler="/usr/bin/c++"))
    return topo, resolve(load_space(find_space("cpu")), topo)


def test_a_compile_that_fails_is_not_tried_again_and_the_search_goes_on(tmp_path, topo):
    topo, space = compiling(topo)
    assert space.knobs["compile"] == (False, True)
    sim = BrokenCompiler()
    study = new_study(tmp_path)
    res = run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
                     options=SearchOptions(budget_s=400, min_trial_s=10, patience=100))
    recs = records(study)
    tried = [r for r in recs if r.config.compile]
    assert len(tried) == 1 and tried[0].reason == FAILED   # the guess, then never again
    assert sum(1 for r in recs if not r.config.compile and r.outcome == Outcome.OK) >= 5
    assert res.stop_reason == "budget"


def test_the_account_shows_compiling_on_its_own_line():
    account = Account()
    for cache, seconds, recompiles in (("cold", 14.2, 0), ("warm", 3.1, 1), ("warm", 0.0, 0)):
        account.book("trials", TrialResult(outcome=Outcome.OK, seconds=30.0, compile_s=seconds,
                                           compile_cache=cache, recompiles=recompiles,
                                           fixed={"start": 1.0, "warmup": seconds + 0.5}), "k")
    account.book("trials", TrialResult(outcome=Outcome.OK, seconds=20.0), "eager")
    stored = account.to_json(elapsed_s=200.0, budget_s=300.0)
    assert (stored["compile_s"], stored["compiled"], stored["recompiles"]) == \
        (17.3, {"cold": 1, "warm": 2}, 1)
    assert "  compiling (torch.compile) 00:17 of the fixed costs: 1 run(s) compiled cold, 2 warm " \
           "(from the cache, or a compiled model kept), 1 recompile(s)" in describe(stored)
    # an account stored before compiling was counted, or with nothing compiled, says nothing
    assert not any("torch.compile" in line for line in describe(Account().to_json(
        elapsed_s=1.0, budget_s=300.0)))


class DearCompile(Sim):
    """Every compiled throughput run pays a compile of `compile_s` once more on top of its
    run (as a first compile does), and runs 1.3x once compiled."""

    def __init__(self, compile_s: float):
        super().__init__(trial_s=5.0)
        self.compile_s = compile_s

    def __call__(self, c, mode, seed=0, samples=None, **kw):
        r = super().__call__(c, mode, seed=seed, samples=samples)
        if c.compile and mode == "throughput":
            self.t += self.compile_s
            return dataclasses.replace(r, throughput=r.throughput * 1.3,
                                       seconds=r.seconds + self.compile_s,
                                       compile_s=self.compile_s, compile_cache="cold")
        return r


def test_a_compile_is_not_priced_into_the_runs_the_reserve_keeps_time_for(tmp_path, topo):
    """The reserve prices verification, settling and confirmation runs from this search's own
    runs; a compile is paid once per launch and graph, and a fresh clone's 10-minute search that
    priced every run at a compile's 20 s stopped sampling at 1:44 with 5 minutes unused. With
    dear compiles the search samples its budget out as with none: the compile seconds are spent
    once by the trials that paid them, not reserved again for each run after them."""
    topo, space = compiling(topo)
    ran = {}
    for compile_s in (0.0, 40.0):
        sim = DearCompile(compile_s)
        res = run_search(new_study(tmp_path, f"c{compile_s:.0f}"), space=space, topology=topo,
                         evaluate=sim, clock=sim,
                         options=SearchOptions(budget_s=600, min_trial_s=5, patience=100))
        assert res.stop_reason == "budget"
        ran[compile_s] = sim.t
    # both sample until the reserve is due: the dear compiles' search is not cut short by a
    # reserve priced at them (before the fix it stopped with a reserve of the whole rest)
    assert ran[40.0] >= 0.8 * ran[0.0], ran


class TimesCeilings(Sim):
    """Every throughput trial asked for its class's ceiling times it as the worker does: two
    untimed steps of `step_s` and a window of CEILING_SECONDS, on top of its own run."""

    step_s = 0.25

    def __call__(self, c, mode, seed=0, samples=None, ceiling_above=None, **kw):
        r = super().__call__(c, mode, seed=seed, samples=samples)
        if mode == "throughput" and ceiling_above is not None:
            extra = CEILING_SECONDS + 2 * self.step_s
            self.t += extra
            return dataclasses.replace(r, seconds=r.seconds + extra, step_median_s=self.step_s,
                                       ceiling=r.throughput * 1.1)
        return r


def test_the_reserve_prices_its_runs_without_the_ceiling_a_trial_timed(tmp_path, topo):
    """Verification and settling runs time no ceiling; priced with a trial's ceiling, a
    5-minute search's verification windows cost 5.5 s instead of the 3.3 s they took, and it
    stopped sampling at 1:44 with 40 s never used (issue 62). The search's own prices are its
    runs less their ceilings, while the next trial is still expected at its whole length."""
    sim, notes = TimesCeilings(trial_s=3.0), Notes()
    res = run_search(new_study(tmp_path), space=resolve(load_space(find_space("cpu")), topo),
                     topology=topo, evaluate=sim, clock=sim, progress=notes,
                     options=SearchOptions(budget_s=300, min_trial_s=3, patience=100,
                                           ceiling=True))
    assert res.stop_reason == "budget"
    assert res.costs.start_s == pytest.approx(3.0)    # no ceiling in what the reserve prices
    assert without_ceiling(5.5, ceiling_timed=True, step_s=0.25) == pytest.approx(3.0)
    assert without_ceiling(5.5, ceiling_timed=False, step_s=0.25) == 5.5
    # and the search says what it kept the rest for, when it stops sampling for it
    said = [n for n in notes.seen if n.startswith("sampling stops with ")]
    assert len(said) == 1 and "verification" in said[0] and "margin" in said[0], notes.seen


class Notes(Silent):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def note(self, text: str) -> None:
        self.seen.append(text)


def test_the_first_guess_is_eager_where_compiling_lost_on_the_default_launch(topo):
    """The built-in transformer compiled ran 0.86x eager on the default launch; the guess still
    compiled, a 5-minute search never measured its eager twin and recommended compiled bf16 at
    1.09x over the default. Where the default launch compiled lost, the guess is eager (the
    descent's second move still measures the compiled side); where it won, the guess compiles."""
    topo, space = compiling(topo)
    base = default_launch(space, topo)
    for compiled, guessed in ((800.0, False), (1200.0, True)):
        known = {c.key(): Record(config=c, role=role, feasible=True, result=TrialResult(
            outcome=Outcome.OK, throughput=thr)) for c, role, thr in (
                (base, Role.DEFAULT, 1000.0),
                (base.with_(compile=True), Role.DEFAULT_COMPILED, compiled))}
        guess = Guide("descent", topo, lambda c: c.key(), ruled_out).next(space, known)
        assert guess["compile"] is guessed and guess["precision"] == "bf16", (compiled, guess)
    # before the compiled reference ran, the guess compiles (as before)
    assert Guide("descent", topo, lambda c: c.key(), ruled_out).next(space, {})["compile"] is True


class Compiles(Sim):
    """Compiled trials run 1.3x and pay a compile on top: `cold_s` for a graph (measure/
    compile_cost.graph_key) no trial compiled before, `warm_s` for one that shares a graph (a
    launch compiles anew from inductor's cache: 7-14 s each on the 2-core EPYC)."""

    def __init__(self, cold_s: float, warm_s: float):
        super().__init__(trial_s=5.0)
        self.cold_s, self.warm_s, self.graphs = cold_s, warm_s, set()
        self.ends: list[tuple[float, bool]] = []     # (end of each throughput run, compiled)

    def __call__(self, c, mode, seed=0, samples=None, **kw):
        r = super().__call__(c, mode, seed=seed, samples=samples)
        if mode != "throughput":
            return r
        if c.compile:
            cold = graph_key(c) not in self.graphs
            self.graphs.add(graph_key(c))
            spent = self.cold_s if cold else self.warm_s
            self.t += spent
            r = dataclasses.replace(r, throughput=r.throughput * 1.3, seconds=r.seconds + spent,
                                    compile_s=spent, compile_cache="cold" if cold else "warm")
        self.ends.append((self.t, c.compile))
        return r


def _kept_s(note: str) -> float:
    """The seconds a 'sampling stops with ... kept for 00:53 verification, ...' note keeps."""
    kept = note.split("kept for ", 1)[1]
    return sum(int(m) * 60 + int(s) for m, s in re.findall(r"(\d+):(\d\d)", kept))


@pytest.mark.parametrize("cold_s, warm_s, said", [
    (60.0, 0.5, "would add about 60 s"),          # the graph is new: priced as a cold compile
    (15.0, 15.0, "would add about 15 s")])        # every compile as dear, warm cache or not
def test_a_trial_whose_compile_would_overrun_the_time_for_trials_is_left_unrun(
        tmp_path, topo, cold_s, warm_s, said):
    """The trials' median leaves compiles out (the runs the reserve prices do not pay them), so
    a compiled trial sampled last overran the time for trials by its compile (a 5-minute
    search's last trial, compiled from a warm cache, took 22 s against the 7 s expected, and
    the leader's confirmation no longer fitted). A compiled proposal is priced with this
    search's compiles (its cold ones where its graph is new); one that does not fit the time
    left for trials is left unrun (PRUNED, with why), and no sampled trial ends inside the
    time kept back."""
    topo, space = compiling(topo)
    sim, notes = Compiles(cold_s=cold_s, warm_s=warm_s), Notes()
    study = new_study(tmp_path)
    res = run_search(study, space=space, topology=topo, evaluate=sim, clock=sim, progress=notes,
                     options=SearchOptions(budget_s=420, min_trial_s=5, patience=100))
    assert res.stop_reason == "budget"
    assert sum(compiled for _, compiled in sim.ends) >= 2     # compiled trials ran while they fit
    stop = next(n for n in notes.seen if n.startswith("sampling stops with "))
    sampled_until = max(t for t, _ in sim.ends)
    # the last throughput run ended before the time kept back (a trial's length of slack: one
    # may still run into the margin the reserve holds, never a whole compile)
    assert 420 - sampled_until >= _kept_s(stop) - sim.trial_s, (sampled_until, stop)
    unrun = [t for t in study.get_trials(deepcopy=False)
             if t.state == TrialState.PRUNED and t.user_attrs.get("role") == Role.UNRUN]
    assert unrun and all(t.user_attrs["reason"].startswith("not run: compiling it") and
                         said in t.user_attrs["reason"] for t in unrun), \
        [t.user_attrs["reason"] for t in unrun]
    assert any(said in n for n in notes.seen)
    # an unrun proposal is no record: reports and the dashboard list measured trials only
    assert all(r.role != Role.UNRUN for r in records(study))


def test_what_a_cold_compile_adds_is_priced_per_graph():
    """The graph a compiled launch shares with another: same micro-batch, dtype, layout and
    threads per rank; the ranks, binding or allocator change no graph."""
    base = Config(compile=True, nproc=2, threads=1)
    assert graph_key(base) == graph_key(base.with_(allocator="tcmalloc", binding="taskset"))
    assert graph_key(base) != graph_key(base.with_(precision="bf16"))
    assert graph_key(base) != graph_key(base.with_(threads=2))
    assert graph_key(base) != graph_key(base.with_(nproc=1))            # micro-batch doubles
    assert graph_key(base.with_(threads=None)) != graph_key(base.with_(threads=None, nproc=1))
