"""`autotune report` and the dashboard's note on a stored lower-bound figure (issue 47): the
headline names the bound and the median, one range at most per figure (the 95% one, named), and
never the word "settled" for a lower bound. Real SQLite (tests/verdict_studies.py)."""
from __future__ import annotations

import json
import re

from autotune.cli import main
from autotune.config import Config
from autotune.dashboard import note_markdown
from verdict_studies import (ISSUE_ROUNDS, LOWER_BOUND_HEADLINE, WIDE_ROUNDS, recommendation,
                             study_recommending)

RANGE = re.compile(r"\d\.\d+-\d\.\d+x")


def _report(capsys, url: str, *more: str) -> str:
    rc = main(["report", "--storage", url, *more])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


def _recommendation_block(text: str) -> list[str]:
    """The report's lines from the headline to the configuration."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(("verified speedup",
                                                                        "faster than")))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("  config:"))
    return lines[start:end + 1]


def test_report_headlines_the_lower_bound_once_and_never_as_settled(tmp_path, capsys):
    url, _ = study_recommending(tmp_path / "r", recommendation(ISSUE_ROUNDS))
    block = _recommendation_block(_report(capsys, url))
    assert block[0] == LOWER_BOUND_HEADLINE
    text = "\n".join(block)
    assert "settled" not in text and "interval" not in text and not RANGE.search(text)
    assert text.count("95%") == 1 and "verification:" not in text
    data = json.loads(_report(capsys, url, "--json"))["recommendation"]
    assert data["verdict"] == "lower_bound" and data["settled"] is False
    assert data["headline"] == LOWER_BOUND_HEADLINE
    # the per-round extremes stay in the JSON only, as what they are: the settling's low/high
    assert (data["settling"]["low"], data["settling"]["high"]) == (1.50, 2.40)


def test_report_shows_an_unsettled_figure_with_its_95_percent_interval_alone(tmp_path, capsys):
    url, _ = study_recommending(tmp_path / "r", recommendation(WIDE_ROUNDS))
    text = "\n".join(_recommendation_block(_report(capsys, url)))
    assert RANGE.findall(text) == ["0.91-1.66x"] and "95% interval 0.91-1.66x" in text
    assert "1.1-1.4" not in text   # the rounds' min-max range, shown beside it before


def test_a_default_launch_win_shows_the_bounded_candidates_figure_once(tmp_path, capsys):
    rec = recommendation(ISSUE_ROUNDS, config=Config(), default_wins=True,
                         note="the accuracy of bf16 fell 1.4 pp below the default launch's")
    url, _ = study_recommending(tmp_path / "r", rec)
    out = _report(capsys, url)
    assert "\nno verified speedup: the default launch is the best configuration found" in out
    assert ("  verification: ≥1.75x (95% lower bound, 12 rounds; median 1.90x)" in out)


def test_the_dashboards_note_names_the_lower_bound(tmp_path):
    rec = recommendation(ISSUE_ROUNDS)
    note = note_markdown("s", rec.to_json(), None)
    assert f"**{LOWER_BOUND_HEADLINE}**" in note
    assert "settled" not in note and not RANGE.search(note)
