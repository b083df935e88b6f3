"""Script mode's scoring: what a user's own training command (`autotune search -- python
train.py ...`) measured. Its command template is script/template.py's.

Pure: metrics are read from text and JSON the runner left behind. Metrics, in order of preference:
  1. `autotune.report_metrics(samples_per_sec=..., accuracy=...)` from the script (rank 0's report);
  2. `--metric REGEX` over rank 0's output: the MEDIAN of all matches (warm-up lines and one-off
     spikes move it less than the last or the mean would);
  3. neither: the work done per second of wall time for the whole run (report_metrics(samples=...)
     / wall, else 1 / wall), start-up included. The weakest measure: it only ranks configurations
     right when the script does a fixed amount of work, and it is labelled as such wherever it
     appears.
With `--lower-is-better` the --metric number is a time or a loss: the score is its inverse, so
every ratio (speedup = default's time / tuned time) reads the same as for a throughput. Whatever
the score, what is printed is the number the script printed, in its own unit (the wall-time
fallback prints seconds per run).
Accuracy: autotune.report_metrics(accuracy=...), else the LAST match of `--accuracy REGEX` (the
final evaluation); a `%` right after the number means percent, so 93.5% is stored as 0.935 like the
built-in workloads' accuracy.
Numbers are read as scripts print them (`6,508`, `1.2e4`, `12.5 ms`: parse_number); a pattern
whose matches hold no number fails the trial with the text it matched, not "matched nothing".
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Any

from ..script.template import compile_metric

SOURCES = {"report": "autotune.report_metrics() from the script",
           "pattern": "the --metric pattern over rank 0's output (median of the matches)",
           "wall_time": "work per second of wall time for the whole run, start-up included "
                        "(weakest measure: no autotune.report_metrics() and no --metric)"}


# A number as scripts print it: an optional sign, digits with optional thousands separators
# (`6,508`, `6_508`, `6'508`: groups of exactly three, so `1,5` is not read as 15; not spaces,
# which also separate two numbers),
# an optional fraction and exponent (`1.2e+03`), then whatever unit the pattern left in.
_NUMBER = re.compile(r"[+-]?(?:(?:\d{1,3}(?:([,_'])\d{3})(?:\1\d{3})*|\d+)(?:\.\d*)?|\.\d+)"
                     r"(?:[eE][+-]?\d+)?")


def parse_number(text: str) -> float | None:
    """The number `text` starts with, or None. What follows it may be a unit (`6,508 samples/s`,
    `12.5ms`, `93.5%`) but not more digits or separators: `1,5`, `1.2.3` and `6 508` are not
    numbers rather than guesses, and nan/inf are not throughputs."""
    split = _split_number(text)
    return None if split is None else split[0]


def _split_number(text: str) -> tuple[float, str] | None:
    """(the leading number, what follows it) or None; see parse_number."""
    text = text.strip()
    m = _NUMBER.match(text)
    if m is None:
        return None
    rest = text[m.end():]
    if rest[:1] and (rest[0] in ",._'" or rest.lstrip()[:1].isdigit()):
        return None   # `1,5`, `1.2.3`, `6 508`: more digits follow, so which number is meant?
    digits = m.group(0).replace(m.group(1), "") if m.group(1) else m.group(0)
    return float(digits), rest


@dataclass(frozen=True, kw_only=True)
class Matches:
    values: tuple[float, ...]                  # every match that held a number, in order
    not_numbers: tuple[tuple[str, str], ...]   # (whole match, group) of every one that did not


# A pattern is matched line by line, on lines cut to this many characters: a script's output is
# not ours, and the work of a match grows with the text it runs over (a line of junk megabytes
# long). What still backtracks for ever on a short line, `(a+)+$`, is stopped by the deadline of
# run/bounded.py, which runs every match of a trial.
MAX_LINE = 1000


def _lines(text: str):
    """(offset of the line in `text`, the line cut to MAX_LINE) for every line."""
    at = 0
    for line in text.split("\n"):
        yield at, line[:MAX_LINE]
        at += len(line) + 1


def metric_matches(text: str, metric: str, *, percent: bool = False) -> Matches:
    """Every number the pattern captures in `text`, line by line (group 1, else the whole
    match), and the matches that are not numbers. `percent`: a number written with a trailing %
    (inside the group or right after it) is divided by 100."""
    pattern = compile_metric(metric)
    assert pattern is not None
    group = 1 if pattern.groups else 0
    values: list[float] = []
    not_numbers: list[tuple[str, str]] = []
    for _at, line in _lines(text):
        for m in pattern.finditer(line):
            captured = m.group(group) or ""
            split = _split_number(captured)
            if split is None:
                not_numbers.append((m.group(0), captured))
                continue
            number, rest = split
            if percent and (rest.lstrip().startswith("%")
                            or (not rest and line[m.end(group):m.end(group) + 1] == "%")):
                number *= 0.01
            values.append(number)
    return Matches(values=tuple(values), not_numbers=tuple(not_numbers))


def last_match_end(text: str, metric: str) -> int | None:
    """Where in `text` the pattern's last match (line by line) ends; None: it matches nothing."""
    pattern = compile_metric(metric)
    assert pattern is not None
    last = None
    for at, line in _lines(text):
        for m in pattern.finditer(line):
            last = at + m.end()
    return last


def metric_values(text: str, metric: str, *, percent: bool = False) -> list[float]:
    return list(metric_matches(text, metric, percent=percent).values)


def not_a_number(pattern: str, found: Matches, option: str = "--metric") -> str:
    """Why a pattern that matched gave no number ("" when it gave one, or matched nothing): its
    group (or match) and the matched text, so the pattern can be fixed."""
    if not found.not_numbers or found.values:
        return ""
    whole, captured = found.not_numbers[0]
    count = len(found.not_numbers)
    what = f"its group is not a number: {captured!r}, in" if compile_metric(pattern).groups \
        else "the match is not a number:"
    return (f"{option} {pattern!r} matched {count} time{'s' if count > 1 else ''} in rank 0's "
            f"output, but {what} the matched text {whole.strip()!r}")


def _no_metric(metric: str, found: Matches, lower_is_better: bool) -> str:
    """Why a --metric pattern gave no score: it matched nothing, matched only text that is not a
    number (shown, so the pattern can be fixed), or only non-positive times."""
    return not_a_number(metric, found) or (
        f"no metric found in the output (--metric {metric!r} matched nothing"
        f"{' positive' if lower_is_better and found.values else ''} in rank 0's output)")


@dataclass(frozen=True, kw_only=True)
class ScriptMetric:
    value: float | None              # the score, higher is better; None: no metric where required
    source: str                      # a key of SOURCES
    accuracy: float | None = None
    values: tuple[float, ...] = ()   # every score the pattern gave (inverted when lower is better)
    problem: str = ""                # why value is None
    shown: str = ""                  # the measured number in the script's own unit, for people


def script_metric(*, report: dict[str, Any] | None, log_text: str, metric: str | None,
                  wall_seconds: float, accuracy: str | None = None,
                  lower_is_better: bool = False) -> ScriptMetric:
    """The score of one finished script run, by the order of preference in the module doc."""
    report = report or {}
    acc = report.get("accuracy")
    acc = float(acc) if isinstance(acc, (int, float)) else None
    sps = report.get("samples_per_sec")
    reported = isinstance(sps, (int, float)) and sps > 0
    if acc is None and accuracy is not None:
        matched = metric_matches(log_text, accuracy, percent=True)
        acc = matched.values[-1] if matched.values else None
        problem = not_a_number(accuracy, matched, "--accuracy")
        if problem:   # a pattern that matches the wrong text: a broken run, not a missing number
            return ScriptMetric(value=None, problem=problem, source="report" if reported else
                                "pattern" if metric is not None else "wall_time")
    if reported:
        return ScriptMetric(value=float(sps), source="report", accuracy=acc,
                            shown=f"{float(sps):.4g} samples/s (autotune.report_metrics)")
    if metric is not None:
        found = metric_matches(log_text, metric)
        raw = found.values
        if lower_is_better:
            raw = [v for v in raw if v > 0]   # 0 s or a 0 loss cannot be inverted into a score
        if not raw:
            return ScriptMetric(value=None, source="pattern", accuracy=acc,
                                problem=_no_metric(metric, found, lower_is_better))
        median = statistics.median(raw)
        scores = [1.0 / v for v in raw] if lower_is_better else raw
        return ScriptMetric(value=1.0 / median if lower_is_better else median, source="pattern",
                            accuracy=acc, values=tuple(scores),
                            shown=f"{median:.4g} (--metric, "
                                  f"{'lower' if lower_is_better else 'higher'} is better)")
    samples = report.get("samples")
    seconds = float(report.get("seconds") or wall_seconds)
    work = float(samples) if isinstance(samples, (int, float)) and samples > 0 else 1.0
    shown = (f"{work / max(seconds, 1e-9):.4g} samples/s over the whole run" if work != 1.0
             else f"{seconds:.2f} s per run (wall time)")
    return ScriptMetric(value=work / max(seconds, 1e-9), source="wall_time", accuracy=acc,
                        shown=shown)


