"""The weighing inside a whole search (`tune.search`, replayed: a table of throughputs and compile
costs answers each trial while a simulated clock advances, real SQLite): where the space offers
compile, the default launch compiled is measured as a reference and verified beside the others;
a compile of ten minutes that runs 1.5x loses to an eager launch at 1.2x over a 10-minute run,
and wins over a 10-hour one. The summary, `report` and the export header say so in the same
words (recommend/compile_words.py)."""
from __future__ import annotations

import dataclasses
import tempfile

import optuna
import pytest

from autotune.config import Config
from autotune.result import Outcome, TrialResult
from autotune.reporting.report import build_report
from autotune.study.attrs import StudyAttrs
from autotune.study.records import DEFAULT_COMPILED_WORDS, Role, records
from autotune.tune import SearchRequest, parse_run_length, search
from two_core import topo  # noqa: F401 - fixture: the captured 2-core EPYC

SPACE = """\
name: compile-weighed
knobs:
  compile: [false, true]
  allocator: [default, tcmalloc]
"""
COMPILE_S = 600.0     # cold: ten minutes, a large model's compile
WARM_S = 40.0         # from inductor's cache, once this launch compiled before


class Sim:
    """tcmalloc 1.2x, compile 1.5x once compiled (1.8x with both), run_cpu's binding 0.95x."""

    def __init__(self) -> None:
        self.t = 0.0
        self.compiled: set[str] = set()

    def elapsed(self) -> float:
        return self.t

    def __call__(self, c: Config, mode: str, seed: int = 0, **kw) -> TrialResult:
        self.t += 10.0
        if mode == "accuracy":
            return TrialResult(outcome=Outcome.OK, seconds=10.0,
                               accuracy=0.80 + (0.0, 0.001, -0.001)[seed % 3])
        speed = 100.0 * (1.2 if c.allocator == "tcmalloc" else 1.0) * \
            (1.5 if c.compile else 1.0) * (0.95 if c.binding != "none" else 1.0)
        extra = {}
        if c.compile:
            warm = c.key() in self.compiled
            self.compiled.add(c.key())
            extra = {"compile_s": WARM_S if warm else COMPILE_S,
                     "compile_cache": "warm" if warm else "cold", "recompiles": 0}
        return TrialResult(outcome=Outcome.OK, throughput=speed, seconds=10.0, **extra)


@pytest.fixture
def compiling(topo, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))   # the machine lock, kept here
    caps = dataclasses.replace(topo.capabilities, cxx_compiler="/usr/bin/g++")
    (tmp_path / "space.yaml").write_text(SPACE)
    return dataclasses.replace(topo, capabilities=caps), tmp_path


def _search(compiling, run_length: str):
    topology, tmp = compiling
    req = SearchRequest(budget_s=1800.0, results=str(tmp / run_length), seed=0,
                        space=str(tmp / "space.yaml"), run_length=parse_run_length(run_length))
    sim = Sim()
    tuned = search(req, label="cnn", topology=topology, evaluate=sim, clock=sim)
    study = optuna.load_study(study_name=tuned.summary["study"], storage=tuned.summary["storage"])
    return tuned, study


def test_a_dear_compile_loses_over_a_short_run_and_is_named_with_why(compiling):
    tuned, study = _search(compiling, "10m")
    rec = tuned.recommendation
    assert rec is not None and rec.config == Config(allocator="tcmalloc")
    # the default launch compiled was measured as a reference and verified beside the others
    assert any(r.role == Role.DEFAULT_COMPILED and r.config == Config(compile=True)
               for r in records(study))
    assert Role.DEFAULT_COMPILED in {v.role for v in rec.candidates}
    assert rec.vs_default_compiled is not None
    stored = StudyAttrs.of(study).recommendation
    passed = stored["weighing"]["passed"]
    assert passed["changes"] == "allocator=tcmalloc compile=True" and passed["cache"] == "cold"
    assert passed["compile_s"] == COMPILE_S
    # 600 / (1/1.2 - 1/1.8) = 2160 s of training before it pays; the run is 600 s
    assert passed["break_even_s"] == pytest.approx(2160.0, rel=0.02)
    report = build_report(study).text()
    line = next(x for x in report.splitlines() if "not recommended: allocator=tcmalloc "
                                                   "compile=True" in x)
    assert "pays for itself only after 36m" in line and "the run is 10m00s" in line
    # the compiled reference: slower at its steady rate, its compile weighed over the run:
    # (600 + 600/1.5) / (600/1.2) = 2.00x
    assert f"0.80x over {DEFAULT_COMPILED_WORDS} at the steady rate; 2.00x to finish a run of " \
        "10m00s, its compile included" in report
    # the export header carries the same line
    assert line.strip() in tuned.command.replace("# ", "")
    assert StudyAttrs.of(study).run_length_json == {"seconds": 600.0}


def test_the_same_compile_wins_over_a_long_run_and_says_when_it_pays(compiling):
    tuned, study = _search(compiling, "10h")
    rec = tuned.recommendation
    assert rec is not None and rec.config == Config(allocator="tcmalloc", compile=True)
    winner = StudyAttrs.of(study).recommendation["weighing"]["winner"]
    assert winner["against"] == "allocator=tcmalloc" and winner["compile_s"] == COMPILE_S
    report = build_report(study).text()
    assert "compiling pays for itself after 36m" in report
    assert "a run of 10h00m (--run-length)" in report
    assert "compiling pays for itself after 36m" in tuned.command
    # the compiled winner against the default launch compiled: 1.8 / 1.5
    assert rec.vs_default_compiled == pytest.approx(1.2, rel=0.02)
