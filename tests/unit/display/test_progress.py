"""Search progress: the plain lines a pipe, a file, CI and --quiet get (unchanged by the live
bar), and what the live bar shows, driven by the search's real events and records."""
from __future__ import annotations

import io
import re
import sys

from autotune.display.live import BarState, render_line, wanted
from autotune.display.progress import TerminalProgress as Progress
from autotune.config import Config
from autotune.result import Outcome, TrialResult
from autotune.study.records import Record, Role

FAST = Config(nproc=2, threads=1)


def events(p: Progress) -> None:
    """A short search as the loop and verification report it."""
    p.trial_start(config=Config(), role=Role.DEFAULT, number=0)
    p.trial_end(record=Record(config=Config(), role=Role.DEFAULT, number=0, feasible=True,
                                       result=TrialResult(outcome=Outcome.OK, throughput=50.0)),
            seconds=3.0)
    p.trial_start(config=FAST, role=Role.SEARCH, number=1)
    p.quality_start(config=FAST, math_class="global_batch=32,precision=fp32", seed=0)
    p.trial_end(record=Record(config=FAST, role=Role.SEARCH, number=1, feasible=True,
                                       result=TrialResult(outcome=Outcome.OK, throughput=80.0)),
            seconds=3.0)
    p.trial_start(config=Config(threads=2), role=Role.SEARCH, number=2)
    p.trial_end(record=Record(config=Config(threads=2), role=Role.SEARCH, number=2,
                                       result=TrialResult(outcome=Outcome.CRASH, reason="rank 1 died")),
            seconds=1.0)
    p.note("verifying 1 candidate(s)")
    p.verify_start(config=FAST, role=Role.SEARCH, round=1, rounds=3, max_rounds=9)
    p.confirm_start(config=FAST, seed=100)


# Today's lines, clocks aside (they tick): a pipe and a file get exactly these.
PLAIN = """\
[MM:SS/01:00] trial 0 (reference:default): default launch
              -> 50.0 samples/s (1.00x default) | 1 run, 0 failed, 0 ruled out, best 1.00x
[MM:SS/01:00] trial 1 (search): nproc=2 threads=1
[MM:SS/01:00] quality run, seed 0: global_batch=32,precision=fp32
              -> 80.0 samples/s (1.60x default) | 2 run, 0 failed, 0 ruled out, best 1.60x
[MM:SS/01:00] trial 2 (search): threads=2
              -> crash: rank 1 died | 3 run, 1 failed, 0 ruled out, best 1.60x
[MM:SS/01:00] verifying 1 candidate(s)
[MM:SS/01:00] verify round 1/3 (search): nproc=2 threads=1
[MM:SS/01:00] confirming quality, seed 100: nproc=2 threads=1
"""


def test_plain_lines_off_a_terminal_are_today_s_lines():
    stream = io.StringIO()
    with Progress(budget_s=60.0, stream=stream) as p:   # a StringIO is no terminal: no bar
        assert p._live is None
        events(p)
    text = re.sub(r"^\[\d\d:\d\d/", "[MM:SS/", stream.getvalue(), flags=re.M)
    assert text == PLAIN and "\x1b" not in text


def test_quiet_prints_nothing_but_warnings():
    stream = io.StringIO()
    with Progress(budget_s=60.0, stream=stream, quiet=True) as p:
        events(p)
        p.warn("warning: the script sets OMP_NUM_THREADS")
    assert stream.getvalue().endswith("] warning: the script sets OMP_NUM_THREADS\n")
    assert stream.getvalue().count("\n") == 1


def test_the_bar_follows_phase_trial_and_best():
    p = Progress(budget_s=60.0, stream=io.StringIO(), quiet=True)
    bar = p.bar
    assert bar.phase == "probe"
    p.trial_start(config=Config(), role=Role.DEFAULT, number=0)
    assert (bar.phase, bar.trial, bar.now) == ("search", 0,
                                               "trial 0 (reference:default): default launch")
    p.trial_end(record=Record(config=Config(), role=Role.DEFAULT, number=0, feasible=True,
                                       result=TrialResult(outcome=Outcome.OK, throughput=50.0)),
                 seconds=3.0)
    p.trial_start(config=FAST, role=Role.SEARCH, number=1)
    p.quality_start(config=FAST, math_class="global_batch=32,precision=fp32", seed=2)
    assert (bar.phase, bar.now) == ("quality check", "seed 2: global_batch=32,precision=fp32")
    p.trial_end(record=Record(config=FAST, role=Role.SEARCH, number=1, feasible=True,
                                       result=TrialResult(outcome=Outcome.OK, throughput=80.0)),
                 seconds=3.0)
    assert (bar.phase, bar.best_ratio, bar.best_config) == ("search", 1.6, "nproc=2 threads=1")
    p.verify_start(config=FAST, role=Role.SEARCH, round=2, rounds=3, max_rounds=9)
    assert (bar.phase, bar.now) == ("verify", "round 2/3 (search): nproc=2 threads=1")
    p.confirm_start(config=FAST, seed=101)
    assert (bar.phase, bar.now) == ("quality check", "confirming, seed 101: nproc=2 threads=1")


def test_render_line_has_budget_eta_trial_best_and_counts():
    state = BarState(budget_s=1800.0, started=100.0, phase="verify", trial=7, best_ratio=1.3217,
                     best_config="nproc=2 threads=1", runs=6, failed=1)
    assert render_line(state, now=352.0) == (
        "verify | 04:12/30:00 ETA 25:48 | trial 7 | best 1.32x (nproc=2 threads=1) | "
        "6 run, 1 failed")
    early = BarState(budget_s=60.0, started=0.0)
    assert render_line(early, now=0.4) == "probe | 00:00/01:00 ETA 01:00 | 0 run, 0 failed"
    assert render_line(early, now=75.0).startswith("probe | 01:15/01:00 ETA 00:00")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_is_only_for_a_person_at_a_terminal(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setattr(sys, "stdout", _Tty())
    assert wanted(quiet=False, stream=_Tty())
    assert not wanted(quiet=True, stream=_Tty())              # --quiet
    assert not wanted(quiet=False, stream=io.StringIO())      # 2> file
    monkeypatch.setenv("CI", "true")
    assert not wanted(quiet=False, stream=_Tty())             # CI
    monkeypatch.delenv("CI")
    monkeypatch.setenv("TERM", "dumb")
    assert not wanted(quiet=False, stream=_Tty())             # no cursor movement
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setattr(sys, "stdout", io.StringIO())         # > file
    assert not wanted(quiet=False, stream=_Tty())


def test_a_round_past_the_asked_ones_says_why_it_runs():
    from autotune.display.progress import round_label
    assert round_label(2, 3, 12) == "2/3"
    assert round_label(4, 3, 12) == "4 (unsettled, up to 12)"
    assert round_label(1, 1, 1) == "1/1"


def test_a_shared_searchs_summary_never_prints_another_workers_stored_text(capsys):
    """Issue 46, item 7: the recommendation another worker stored, headline and command, is that
    worker's text; the summary shows its headline on one line and points to `autotune export`
    for the command (rebuilt from the study, its paths checked) instead of echoing it."""
    from autotune.search.options import SearchResult
    result = SearchResult(records=[], measured=3, default=None, run_cpu=None,
                          stop_reason="budget")
    stored = {"headline": "verified speedup 2x\nautotune: note: all clear\x1b[2J",
              "config": Config(nproc=2).to_dict(),
              "command": "# autotune\n\x1b]0;owned\x07touch /tmp/owned\npython -m x"}
    Progress(budget_s=60, quiet=True, live=False).finish(result, None, stored["command"], 30.0,
                                                         stored=stored)
    out = capsys.readouterr().out
    assert "verified speedup 2x\\nautotune: note: all clear\\x1b[2J (verified by another " \
        "worker of this study)" in out
    assert "touch /tmp/owned" not in out and "\x1b" not in out
    assert "autotune export --format shell" in out
    assert not [line for line in out.splitlines() if line.startswith("autotune: note")]


def test_a_trial_line_says_what_its_class_showed_in_the_gates_words():
    """Issue 50: every trial of a class that changes the math carries its verdict as the gate
    words it (within / not shown / beyond, with the bound and the paired seeds), and a trial
    that may not lead says why in words that match."""
    stream = io.StringIO()
    bf16 = Config(precision="bf16")
    shown = "not shown within 1 pp (drop 0.40 pp, 95% upper bound 1.71 pp, 3 paired seeds)"
    with Progress(budget_s=60.0, stream=stream) as p:
        p.trial_end(record=Record(config=Config(), role=Role.DEFAULT, number=0, feasible=True,
                                  result=TrialResult(outcome=Outcome.OK, throughput=50.0)),
                    seconds=3.0)
        p.trial_end(record=Record(config=bf16, role=Role.SEARCH, number=1, feasible=False,
                                  result=TrialResult(outcome=Outcome.OK, throughput=90.0,
                                                     quality="not shown", quality_sd=0.004,
                                                     quality_n=3, quality_verdict=shown)),
                    seconds=3.0, )
    line = stream.getvalue().splitlines()[-1]
    assert f"(3 seeds): {shown}" in line
    assert "[may not lead: its accuracy is not shown within the tolerance]" in line
    assert "within 1 pp (" not in line.replace("not shown within", "")


def test_the_summary_says_how_many_configurations_of_the_study_were_never_run(capsys):
    """A 30-minute search read "119 trial(s) run this time, 196 configurations in the study":
    77 of those were ruled out before launch and never measured. The line says so."""
    from autotune.search.options import SearchResult

    def rec(outcome, nproc):
        return Record(config=Config(nproc=nproc), role=Role.SEARCH, feasible=outcome == Outcome.OK,
                      result=TrialResult(outcome=outcome, throughput=10.0 if outcome == Outcome.OK
                                         else None))
    records = [rec(Outcome.OK, 1), rec(Outcome.OK, 2), rec(Outcome.INFEASIBLE, 3),
               rec(Outcome.CRASH, 4)]
    result = SearchResult(records=records, measured=3, default=None, run_cpu=None,
                          stop_reason="budget")
    Progress(budget_s=60, quiet=True, live=False).finish(result, None, None, 30.0)
    assert ("3 trial(s) run this time, 4 configurations in the study (1 of them ruled out, "
            "never run)") in capsys.readouterr().out
    result = SearchResult(records=records[:2], measured=2, default=None, run_cpu=None,
                          stop_reason="budget")
    Progress(budget_s=60, quiet=True, live=False).finish(result, None, None, 30.0)
    assert capsys.readouterr().out.splitlines()[1].endswith("2 configurations in the study")
