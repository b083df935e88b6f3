"""`export` and `launch` take a lower-bound figure as they take a settled one and carry its words
(issue 47); a default launch recommended only because the best candidate's bound was at or below 1
is still refused by `launch`; a recommendation stored before verdicts existed reads as before.
Real SQLite studies (tests/verdict_studies.py), the CLI's main(), no process launched."""
from __future__ import annotations

import json

import optuna

from autotune.cli import main
from autotune.config import Config
from autotune.study.attrs import write_recommendation
from verdict_studies import (ISSUE_ROUNDS, LOWER_BOUND_HEADLINE, WIDE_ROUNDS, recommendation,
                             study_recommending)


def _main(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def _train(tmp_path) -> str:
    train = tmp_path / "train.py"
    train.write_text("print('trained')\n")
    return str(train)


def test_export_carries_the_lower_bound_in_its_header_and_manifest(tmp_path, capsys):
    url, _ = study_recommending(tmp_path / "r", recommendation(ISSUE_ROUNDS))
    rc, shell, err = _main(capsys, "export", "--storage", url)
    assert rc == 0, err
    header = [line for line in shell.splitlines() if line.startswith("# ")]
    assert f"# {LOWER_BOUND_HEADLINE}" in header
    assert not any("settled" in line or "interval" in line for line in header), header
    rc, text, err = _main(capsys, "export", "--storage", url, "--format", "json")
    m = json.loads(text)["manifest"]
    assert rc == 0 and m["verdict"] == "lower_bound" and m["headline"] == LOWER_BOUND_HEADLINE
    assert round(m["lower_bound"], 2) == 1.75 and round(m["speedup"], 2) == 1.90
    assert m["verified"] is True and m["inconclusive"] is False


def test_launch_takes_a_lower_bound_figure_like_a_settled_one(tmp_path, capsys):
    url, _ = study_recommending(tmp_path / "r", recommendation(ISSUE_ROUNDS))
    rc, out, err = _main(capsys, "launch", "--storage", url, "--dry-run", "--", "python",
                         _train(tmp_path))
    assert rc == 0 and "warning" not in err, err
    assert "from study autotune-cnn" in err and f"({LOWER_BOUND_HEADLINE})" in err
    assert "rank 0:" in out


def test_launch_still_refuses_a_default_launch_whose_best_bound_is_at_or_below_1(tmp_path,
                                                                               capsys):
    """The best candidate's three quiet rounds prove 0.999x at best: no verified speedup, the
    default launch recommended only for want of a verdict, and `launch` says so (exit 2)."""
    rec = recommendation(WIDE_ROUNDS, config=Config(), default_wins=True)
    assert rec.inconclusive
    url, _ = study_recommending(tmp_path / "r", rec)
    rc, out, err = _main(capsys, "launch", "--storage", url, "--dry-run", "--", "python",
                         _train(tmp_path))
    lines = err.strip().splitlines()
    assert rc == 2 and out == "" and len(lines) == 1, err
    assert "holds no verified recommendation (no verified speedup: the best candidate" in lines[0]
    assert "median 1.20x (95% interval 0.91-1.66x, 3 rounds)" in lines[0]
    assert lines[0].endswith("--force launches it anyway")


def test_a_recommendation_stored_before_verdicts_still_reads(tmp_path, capsys):
    """The previous version stored no "verdict" (nor "inconclusive" before that): an unsettled
    default launch is still refused, a settled one exported as settled."""
    rec = recommendation(WIDE_ROUNDS, config=Config(), default_wins=True)
    url, study = study_recommending(tmp_path / "r", rec)
    old = rec.to_json()
    for key in ("verdict", "inconclusive"):
        del old[key]
    for key in ("verdict", "lower_bound"):
        del old["settling"][key]
    write_recommendation(study, {**old, "command": "python -m autotune.worker"})
    rc, _, err = _main(capsys, "launch", "--storage", url, "--dry-run", "--", "python",
                       _train(tmp_path))
    assert rc == 2 and "holds no verified recommendation" in err
    old = {**old, "settled": True, "settling": None, "config": Config(nproc=2).to_dict(),
           "headline": "verified speedup 2.61x over the default launch (95% interval "
                       "2.59-2.63x, 5 rounds)"}
    write_recommendation(optuna.load_study(study_name=None, storage=url), old)
    rc, text, err = _main(capsys, "export", "--storage", url, "--format", "json")
    m = json.loads(text)["manifest"]
    assert rc == 0 and m["verdict"] == "settled" and m["lower_bound"] is None, err
    assert m["headline"] == old["headline"] and m["inconclusive"] is False
