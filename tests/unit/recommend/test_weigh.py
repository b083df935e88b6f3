"""The weighing of a compile against the user's run (recommend/weigh.py) and its words
(recommend/compile_words.py), on literal numbers: --run-length's grammar, the time to finish,
the break-even, the choice, and the lines the summary, report and export header print."""
from __future__ import annotations

import pytest

from autotune.config import Config
from autotune.errors import AutotuneError
from autotune.recommend.compile_words import compile_lines
from autotune.recommend.recommendation import Verified
from autotune.recommend.weigh import (DEFAULT_RUN_LENGTH, RunLength, Weigher, break_even_s,
                                      compile_cost, duration, parse_run_length)
from autotune.result import Outcome, TrialResult
from autotune.study.records import DEFAULT_COMPILED_WON, DEFAULT_COMPILED_WORDS, Role

EAGER, COMPILED = Config(allocator="tcmalloc"), Config(allocator="tcmalloc", compile=True)


@pytest.mark.parametrize("text, seconds, steps", [
    ("2h", 7200.0, None), ("30m", 1800.0, None), ("90s", 90.0, None), ("1h30m", 5400.0, None),
    ("600", 600.0, None), ("5000steps", None, 5000), ("5000 steps", None, 5000),
    (" 1 STEP ", None, 1), (DEFAULT_RUN_LENGTH, 3600.0, None)])
def test_run_length_is_a_duration_as_budget_takes_it_or_a_step_count(text, seconds, steps):
    assert parse_run_length(text) == RunLength(seconds=seconds, steps=steps)


@pytest.mark.parametrize("text, said", [
    ("", "--run-length: empty"), ("0", "must be more than zero"), ("0steps", "steps must be"),
    ("-2h", "run length must be positive"), ("2 hours", "not a duration"),
    ("2.5steps", "steps are a whole number"), ("steps", "steps are a whole number"),
    ("30m1h", "not a duration"), ("9999999h", "more than a year")])
def test_a_run_length_that_is_neither_is_one_clear_error(text, said):
    with pytest.raises(AutotuneError) as err:
        parse_run_length(text)
    assert said in str(err.value) and "\n" not in str(err.value)


def test_a_stored_run_length_reads_back_and_a_forged_one_is_ignored():
    for run in (RunLength(seconds=5400.0), RunLength(steps=5000)):
        assert RunLength.from_json(run.to_json()) == run
    for forged in ({"steps": -1}, {"seconds": float("nan")}, {"steps": True}, "1h", None, {}):
        assert RunLength.from_json(forged) is None
    assert RunLength(steps=5000).text() == "5000 steps" and RunLength(seconds=5400).text() == "1h30m"


def test_durations_read_as_people_compare_them_with_run_length():
    assert [duration(s) for s in (40, 99.4, 200, 3600, 7500)] == \
        ["40 s", "99 s", "3m20s", "1h00m", "2h05m"]


def test_the_break_even_is_the_run_length_where_both_finish_together():
    # 30 s of compile at 1.5x against eager at 1.0x: 30 / (1/1.0 - 1/1.5) = 90 s of the
    # default's work, which the compiled launch does in 30 + 90/1.5 = 90 s too
    assert break_even_s(1.5, 30.0, 1.0) == pytest.approx(90.0)
    assert break_even_s(2.0, 60.0, 1.2) == pytest.approx(60.0 / (1 / 1.2 - 1 / 2.0))
    assert break_even_s(1.2, 30.0, 1.2) is None and break_even_s(1.1, 0.0, 1.3) is None


def test_the_compile_cost_is_the_cold_one_where_measured():
    def r(s, cache):
        return TrialResult(outcome=Outcome.OK, compile_s=s, compile_cache=cache)
    assert compile_cost([r(50.0, "cold"), r(4.0, "warm"), r(70.0, "cold"), r(30.0, "cold")]) == \
        (50.0, "cold")
    assert compile_cost([r(4.0, "warm"), r(6.0, "warm"), None]) == (5.0, "warm")
    assert compile_cost([TrialResult(outcome=Outcome.OK), None]) == (None, None)


def test_a_run_in_steps_is_the_default_launchs_time_for_those_steps():
    # 5000 steps of 32 samples at 320 samples/s: 0.1 s a step, 500 s
    w = Weigher.of(RunLength(steps=5000), 320.0, 32)
    assert (w.default_s, w.step_s) == (pytest.approx(500.0), pytest.approx(0.1))
    assert Weigher.of(RunLength(steps=5000), None, 32) is None
    assert Weigher.of(RunLength(seconds=600.0), None, 32).default_s == 600.0


def _verified(config, ratio, compile_s=None, role="search") -> Verified:
    return Verified(config=config, role=role, search_throughput=100 * ratio,
                    throughputs=(100 * ratio,) * 3, baselines=(100.0,) * 3,
                    compile_s=compile_s, compile_cache="cold" if compile_s is not None else None)


def test_the_soonest_to_finish_leads_and_a_launch_no_sooner_than_the_default_is_dropped():
    eager, compiled = _verified(EAGER, 1.2), _verified(COMPILED, 1.8, compile_s=600.0)
    short = Weigher(RunLength(seconds=600.0), 600.0)
    # 600 s of the default's work: eager 500 s; compiled 600 + 333 = 933 s, past the default's 600
    assert short.finish_s(eager) == pytest.approx(500.0)
    assert short.finish_s(compiled) == pytest.approx(933.33, abs=0.01)
    assert short.ranked([compiled, eager]) == [eager]
    long = Weigher(RunLength(seconds=36000.0), 36000.0)
    # ten hours: compiled 600 + 20000 = 20600 s, eager 30000 s
    assert long.ranked([eager, compiled]) == [compiled, eager]


def _lines_at(run_s: float, compiled_wins: bool) -> list[str]:
    """The words of tcmalloc at 1.2x against tcmalloc compiled at 1.8x after a 600 s compile."""
    eager, compiled = _verified(EAGER, 1.2), _verified(COMPILED, 1.8, compile_s=600.0)
    w = Weigher(RunLength(seconds=run_s), run_s)
    return compile_lines({"weighing": w.to_json(compiled if compiled_wins else eager,
                                                [eager, compiled])})


def test_the_words_of_a_compiled_winner_say_when_compiling_pays():
    # 600 / (1/1.2 - 1/1.8) = 2160 s = 36m
    assert _lines_at(36000.0, compiled_wins=True) == [
        "compiling pays for itself after 36m00s of training (a 10m00s compile, cold cache) "
        "against allocator=tcmalloc; a run of 10h00m (--run-length) takes 5h43m compiled, "
        "8h20m with allocator=tcmalloc"]


def test_a_compile_that_does_not_pay_at_the_run_length_is_named_with_why():
    assert _lines_at(600.0, compiled_wins=False) == [
        "not recommended: allocator=tcmalloc compile=True (1.80x once compiled, a 10m00s "
        "compile, cold cache) pays for itself only after 36m00s of training against "
        "allocator=tcmalloc; the run is 10m00s (--run-length): 15m33s against 8m20s"]


def test_a_compile_no_faster_than_the_winner_never_pays_and_steps_are_said_in_steps():
    eager, compiled = _verified(EAGER, 1.3), _verified(COMPILED, 1.25, compile_s=20.0)
    w = Weigher.of(RunLength(steps=5000), 320.0, 32)
    stored = w.to_json(eager, [eager, compiled])
    assert stored["passed"]["break_even_s"] is None
    assert compile_lines({"weighing": stored}) == [
        "not recommended: allocator=tcmalloc compile=True runs 1.25x the default launch's pace "
        "once compiled (a 20 s compile, cold cache), no faster than allocator=tcmalloc (1.30x): "
        "compiling it never pays"]
    winner = Weigher.of(RunLength(steps=50000), 320.0, 32)
    big = _verified(COMPILED, 2.0, compile_s=30.0)
    line = compile_lines({"weighing": winner.to_json(big, [big])})[0]
    # 30 / (1 - 1/2) = 60 s of the default's steps of 0.1 s: 600 steps
    assert line.startswith("compiling pays for itself after 600 steps of training") and \
        "against the default launch; a run of 50000 steps" in line


def test_the_figure_over_the_default_launch_compiled_and_nothing_when_compile_was_not_offered():
    assert compile_lines({"vs_run_cpu": 1.4, "weighing": {"run": "1h", "default_s": 3600}}) == []
    assert compile_lines({"vs_default_compiled": 1.21}) == [f"1.21x over {DEFAULT_COMPILED_WORDS}"]
    won = {"config": COMPILED.to_dict(), "vs_default_compiled": 1.0,
           "candidates": [{"config": COMPILED.to_dict(), "role": Role.DEFAULT_COMPILED}]}
    assert compile_lines(won) == [f"1.00x over {DEFAULT_COMPILED_WORDS}", DEFAULT_COMPILED_WON]


def test_forged_weighing_fields_print_no_surprises():
    forged = {"weighing": {"run": "1h\nrm -rf /", "winner": {"compile_s": "x", "changes": 3}},
              "vs_default_compiled": "2x"}
    lines = compile_lines(forged)
    assert lines and all("\n" not in line for line in lines)
    assert compile_lines({"weighing": {"passed": {"ratio": float("inf"), "break_even_s": None}}})
