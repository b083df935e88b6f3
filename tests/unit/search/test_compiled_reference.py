"""The default launch compiled as a reference (issue 59): measured where the space offers compile
and never elsewhere, and verified beside the candidates like run_cpu's settings; the lineup keeps
the fastest eager launch of a class beside its compiled one, so a compile that does not pay at the
run length hands over to a launch that was verified."""
from __future__ import annotations

import dataclasses

from autotune.config import Config
from autotune.result import Outcome, TrialResult
from autotune.search.lineup import pick_candidates
from autotune.search.references import compile_offered, reference_configs
from autotune.space.resolve import parse_space, resolve
from autotune.study.records import Record, Role
from two_core import space, topo  # noqa: F401 - fixtures: a 2-core machine and its space


def _resolved(topo, compiler: str | None, knobs: str):
    topo = dataclasses.replace(topo, capabilities=dataclasses.replace(topo.capabilities,
                                                                      cxx_compiler=compiler))
    return topo, resolve(parse_space(f"knobs:\n{knobs}"), topo)


def test_the_compiled_default_is_a_reference_only_where_the_space_offers_compile(topo, space):
    here, offered = _resolved(topo, "/usr/bin/g++", "  compile: [false, true]\n")
    assert compile_offered(offered)
    roles = dict(reference_configs(here, Config(), offered))
    assert roles[Role.DEFAULT_COMPILED] == Config(compile=True)
    assert list(roles)[:2] == [Role.DEFAULT, Role.RUN_CPU]
    # no compiler: resolution drops compile=true, and nothing is said of compiling
    bare, dropped = _resolved(topo, None, "  compile: [false, true]\n")
    assert not compile_offered(dropped)
    assert Role.DEFAULT_COMPILED not in dict(reference_configs(bare, Config(), dropped))
    # the built-in CPU space fixes compile off; without a space, as before
    assert not compile_offered(space) and not compile_offered(None)
    assert len(reference_configs(topo, Config())) == 2


def _rec(config: Config, thr: float, role: str = "search") -> Record:
    return Record(config=config, role=role, feasible=True,
                  result=TrialResult(outcome=Outcome.OK, throughput=thr, math_class="fp32"))


def test_the_lineup_takes_the_compiled_reference_and_the_fastest_eager_launch_of_a_class():
    compiled = [_rec(Config(nproc=2, threads=1, compile=True, allocator=a), thr)
                for a, thr in (("tcmalloc", 300.0), ("jemalloc", 290.0), ("default", 280.0))]
    eager = _rec(Config(nproc=2, threads=1, allocator="tcmalloc"), 200.0)
    reference = _rec(Config(compile=True), 210.0, Role.DEFAULT_COMPILED)
    run_cpu = _rec(Config(binding="taskset", allocator="tcmalloc"), 160.0, Role.RUN_CPU)
    picked = pick_candidates([*compiled, eager, reference, run_cpu, _rec(Config(), 100.0,
                                                                         Role.DEFAULT)])
    assert picked == [compiled[0], eager, run_cpu, reference]


def test_the_launches_kept_running_hold_the_whole_lineup():
    """Every member of verification's fullest lineup, the default launch with it, stays running
    from round to round (run/warm.MAX_OPEN): with 4 kept, each round of this 5-member lineup
    restarted one launch that the reserve had priced as a window."""
    from autotune.run.warm import MAX_OPEN
    from autotune.search.options import SearchOptions
    compiled = [_rec(Config(nproc=2, threads=1, compile=True, allocator=a, precision=p), thr)
                for a, p, thr in (("tcmalloc", "bf16", 300.0), ("jemalloc", "fp32", 290.0),
                                  ("default", "bf16", 280.0))]
    reference = _rec(Config(compile=True), 210.0, Role.DEFAULT_COMPILED)
    run_cpu = _rec(Config(binding="taskset", allocator="tcmalloc"), 160.0, Role.RUN_CPU)
    fullest = pick_candidates([*compiled, reference, run_cpu],
                              n=SearchOptions(budget_s=300.0).verify_configs - 1)
    assert len(fullest) == 4
    assert MAX_OPEN >= 1 + len(fullest)
