"""Numbers as training scripts print them, read by script mode's --metric and --accuracy: the
literal strings real scripts print (thousands separators, units, exponents) and the one-line
reason when a pattern matches text that is not a number."""
from __future__ import annotations

import pytest

from autotune.measure.script import metric_matches, metric_values, parse_number, script_metric


@pytest.mark.parametrize("text, number", [
    ("6,508", 6508.0), ("6,508.25", 6508.25), ("1,234,567", 1234567.0), ("6_508", 6508.0),
    ("6'508", 6508.0), ("42", 42.0), ("  42  ", 42.0), ("-3", -3.0), (".5", 0.5), ("7.", 7.0),
    ("1.2e3", 1200.0), ("1.5E-02", 0.015), ("3e+2", 300.0),
    # a unit the pattern left in
    ("6,508 samples/s", 6508.0), ("12.5ms", 12.5), ("93.5%", 93.5), ("1e-3 s", 0.001),
    ("12epochs", 12.0),
])
def test_numbers_scripts_print_are_read(text, number):
    assert parse_number(text) == pytest.approx(number)


@pytest.mark.parametrize("text", [
    "N/A", "", "nan", "inf", "abc 12",
    "1,5",          # a decimal comma, or a broken group: not guessed
    "1234,567",     # separators group the digits in threes from the first one
    "1,23,456",     # not groups of three
    "1.2.3",        # a version, not a number
    "6 508",        # a space separates two numbers as often as it groups digits
])
def test_text_that_is_not_one_number_is_refused(text):
    assert parse_number(text) is None


def test_the_issue_s_benchmark_line_is_scored():
    # the line an unmodified public DDP benchmark prints, and the pattern a user wrote for it
    log = "Throughput       : 6,508 samples/s\nThroughput       : 6,612 samples/s\n" \
          "Throughput       : 6,410 samples/s\n"
    sm = script_metric(report=None, log_text=log, metric=r"Throughput\s*:\s*([0-9,]+) samples/s",
                       wall_seconds=3.0)
    assert (sm.value, sm.values, sm.problem) == (6508.0, (6508.0, 6612.0, 6410.0), "")
    # a pattern that leaves the unit in its group reads the same
    wide = script_metric(report=None, log_text=log, metric=r"Throughput\s*:\s*(.+)",
                         wall_seconds=3.0)
    assert wide.value == 6508.0


def test_a_match_that_is_not_a_number_is_named_with_its_text():
    log = "epoch 1\nThroughput       : N/A samples/s\n"
    sm = script_metric(report=None, log_text=log, metric=r"Throughput\s*:\s*(\S+) samples/s",
                       wall_seconds=1.0)
    assert sm.value is None
    assert sm.problem == ("--metric 'Throughput\\\\s*:\\\\s*(\\\\S+) samples/s' matched 1 time in "
                          "rank 0's output, but its group is not a number: 'N/A', in the "
                          "matched text 'Throughput       : N/A samples/s'")
    whole = script_metric(report=None, log_text=log * 2, metric=r"Throughput\s*:\s*\S+",
                          wall_seconds=1.0)
    assert whole.problem.endswith("matched 2 times in rank 0's output, but the match is not a "
                                  "number: the matched text 'Throughput       : N/A'")
    # nothing matched at all is a different message
    none = script_metric(report=None, log_text=log, metric=r"img/s: (\d+)", wall_seconds=1.0)
    assert none.problem.startswith("no metric found in the output")


def test_numbers_win_over_matches_that_are_not_numbers():
    # a warm-up line with a placeholder, then real figures: the figures are the metric
    log = "Throughput: -- samples/s\nThroughput: 1,000 samples/s\nThroughput: 3,000 samples/s\n"
    found = metric_matches(log, r"Throughput: (\S+)")
    assert found.values == (1000.0, 3000.0) and found.not_numbers == (("Throughput: --", "--"),)
    sm = script_metric(report=None, log_text=log, metric=r"Throughput: (\S+)", wall_seconds=1.0)
    assert sm.value == 2000.0 and sm.problem == ""


def test_percent_with_a_space_or_outside_the_group_and_accuracy_with_separators():
    assert metric_values("acc 93.5 %", r"acc (.+)", percent=True) == [pytest.approx(0.935)]
    assert metric_values("acc 93.5%", r"acc ([0-9.]+)", percent=True) == [pytest.approx(0.935)]
    assert metric_values("acc 9.35e-1", r"acc (\S+)", percent=True) == [pytest.approx(0.935)]
    sm = script_metric(report=None, log_text="loss 1.5e-2 s\n", metric=r"loss (.+)",
                       wall_seconds=1.0, lower_is_better=True)
    assert sm.value == pytest.approx(1 / 0.015)


def test_an_accuracy_pattern_that_matches_no_number_fails_the_run_with_its_text():
    # a wrong --accuracy would otherwise leave every trial unjudged, silently
    log = "throughput: 100 samples/s\nTest accuracy: pending\n"
    sm = script_metric(report=None, log_text=log, metric=r"throughput: ([0-9.]+)",
                       wall_seconds=1.0, accuracy=r"Test accuracy: (\w+)")
    assert sm.value is None and sm.source == "pattern"
    assert sm.problem == ("--accuracy 'Test accuracy: (\\\\w+)' matched 1 time in rank 0's output, "
                          "but its group is not a number: 'pending', in the matched text "
                          "'Test accuracy: pending'")
    ok = script_metric(report=None, log_text=log + "Test accuracy: 93.5%\n",
                       metric=r"throughput: ([0-9.]+)", wall_seconds=1.0,
                       accuracy=r"Test accuracy: (\S+)")
    assert (ok.value, ok.accuracy, ok.problem) == (100.0, pytest.approx(0.935), "")
