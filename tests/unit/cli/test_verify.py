"""`autotune verify` refusals, on real SQLite and no trial: no study, a study from other hardware,
a study without a recommendation, a recommendation of the default launch with no candidate
stored: one line, exit 2, the
study left as it was."""
from __future__ import annotations

import dataclasses

import pytest

from autotune.cli import main
from autotune.config import Config
from autotune.export.recommendation import save_recommendation
from autotune.probe import probe
from autotune.recommend.recommendation import Recommendation
from autotune.study.storage import describe_study, open_storage, open_study, study_name
from paths import REPO
from results_study import live_topology

MACHINES = REPO / "tests" / "fixtures" / "machines"


def _study(tmp_path, topo, config: Config | None) -> tuple[str, str]:
    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    study = open_study(open_storage(url), study_name("mlp", topo))
    describe_study(study, topology=topo, workload="mlp", space={},
                   settings={"target_seconds": 1.0})
    if config is not None:
        save_recommendation(study, Recommendation(config=config, speedup=1.4, spread=0.3,
                                                  rounds=3, verified=True), topo, "mlp")
    return url, str(db)


def _contents(url: str):
    import optuna
    studies = optuna.get_all_study_summaries(url)
    out = []
    for summary in studies:
        study = optuna.load_study(study_name=summary.study_name, storage=url)
        out.append((summary.study_name, study.user_attrs,
                    [(t.number, t.state, t.values, t.user_attrs) for t in study.trials]))
    return out


def _refused(capsys, argv, expect):
    try:
        rc = main(["verify", *argv])
    except SystemExit as exc:     # argparse's own one line, exit 2
        rc = exc.code
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autotune: error: ") and expect in lines[0], err


def test_without_a_study(tmp_path, capsys):
    _refused(capsys, ["--results", str(tmp_path)], "does not exist; run `autotune search` first")


def test_a_study_from_other_hardware(tmp_path, capsys):
    topo = probe(str(MACHINES / "xeon-2s-icx"), collect_capabilities=False)
    topo = dataclasses.replace(topo, capabilities=live_topology().capabilities)
    url, _db = _study(tmp_path, topo, Config(nproc=2, threads=1))
    before = _contents(url)
    _refused(capsys, ["--storage", url], "was measured on other hardware")
    # what the study holds, not its bytes: SQLite may checkpoint its WAL into the file when a
    # reader closes, which changes the bytes and nothing stored
    assert _contents(url) == before


def test_a_study_without_a_recommendation(tmp_path, capsys):
    url, _ = _study(tmp_path, live_topology(), None)
    _refused(capsys, ["--storage", url], "has no recommendation to verify")


def test_a_recommendation_of_the_default_launch_with_nothing_else_measured(tmp_path, capsys):
    """verify measures the search's best candidates when it recommended the default launch
    (tests/integration/test_verify_candidates.py); with no candidate stored there is nothing to
    measure, and the line says what would find one."""
    url, _ = _study(tmp_path, live_topology(), Config())
    before = _contents(url)
    _refused(capsys, ["--storage", url], "recommends the default launch and has no other "
                                         "configuration that ran within tolerance")
    assert _contents(url) == before


@pytest.mark.parametrize("argv, expect", [
    (["--budget", "soon"], "--budget 'soon': not a duration"),
    (["--rounds", "0"], "'0' must be at least 1"),
    (["--rounds", "1000"], "'1000' must be at most 100"),
    (["--rounds", "many"], "'many' is not a whole number"),
    (["--run-length", "0steps"], "--run-length '0steps': steps must be from 1"),
    (["--run-length", "soon"], "--run-length 'soon': not a duration"),
    (["--run-length", ""], "--run-length: empty"),
])
def test_bad_options(tmp_path, capsys, argv, expect):
    url, _ = _study(tmp_path, live_topology(), Config(nproc=2, threads=1))
    before = _contents(url)
    _refused(capsys, ["--storage", url, *argv], expect)
    assert _contents(url) == before


def test_rounds_help_says_the_range(capsys):
    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "while unsettled (1-100, default: 3)" in text
    # 100 itself is taken: the refusal is the missing study's, not the rounds'
    assert main(["verify", "--rounds", "100", "--storage", "sqlite:////nonexistent/x.db"]) == 2
    assert "must be" not in capsys.readouterr().err


def test_the_stored_headline_verify_shows_as_before_stays_on_its_line():
    """Issue 46, item 7: `before:` quotes the stored headline, which whoever can write the study
    chose: its newline and escape sequences are shown, never acted on."""
    from autotune.commands.verify import Verified
    from autotune.recommend.reverify import Reverified
    rec = Recommendation(config=Config(nproc=2), speedup=1.4, spread=0.1, rounds=3, verified=True)
    previous = "verified speedup 9x\nautotune: note: stored in your study\x1b]0;owned\x07"
    text = Verified(Reverified(recommendation=rec, previous=previous, replaces=False,
                               why_kept="a search stored a new recommendation while this ran"),
                    url="sqlite:///s.db").text()
    lines = text.splitlines()
    assert lines[1] == ("  before: verified speedup 9x\\nautotune: note: stored in your study"
                        "\\x1b]0;owned\\x07")
    assert len(lines) == 3 and "\x1b" not in text


def test_quality_with_no_faster_launch_left_unshown(tmp_path, capsys):
    """`verify --quality` settles the faster launch a search could not show; a recommendation
    that names none has nothing to settle: one line that says what stands, exit 2."""
    url, _ = _study(tmp_path, live_topology(), Config(nproc=2, threads=1))
    before = _contents(url)
    _refused(capsys, ["--storage", url, "--quality"],
             "has no faster launch whose accuracy was not shown")
    assert _contents(url) == before
