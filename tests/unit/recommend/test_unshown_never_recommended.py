"""Item 4 of issue 60: nothing not shown is recommended. Script mode accepts only a
configuration whose paired runs showed it within (or one measured with no accuracy rule), and
names the others with what would show them, never a command that refuses; with no time for a
confirmation, only the default's math stands. Literal records; a real QualityBook on SQLite."""
from __future__ import annotations

from autotune.config import Config
from autotune.quality.evidence import QualityBook
from autotune.recommend.choose import keeps_accuracy, script_accept
from autotune.result import Outcome, TrialResult
from autotune.study.records import Record
from autotune.study.storage import open_storage, open_study


def _rec(config: Config, quality: str | None, verdict: str | None = None) -> Record:
    return Record(config=config, role="search", feasible=True, result=TrialResult(
        outcome=Outcome.OK, throughput=100.0, quality=quality, quality_verdict=verdict))


def test_script_mode_accepts_only_what_was_shown_within():
    shown, unshown, bare = Config(nproc=2), Config(precision="bf16"), Config(nproc=1)
    accept = script_accept([_rec(shown, "within"), _rec(bare, None), _rec(unshown, "not shown",
                            "not shown within 1 pp (drop 0.40 pp, one run against ...)")])
    assert accept(shown).accepted and accept(bare).accepted
    v = accept(unshown)
    assert not v.accepted and v.status == "not shown"
    assert "not shown within 1 pp (drop 0.40 pp" in v.why and "verify --quality" not in v.why
    assert "runs of it on the default's seeds" in v.why


def test_with_no_time_to_confirm_only_the_defaults_math_stands(tmp_path):
    def run(config, mode, *, seed=0, samples=None):
        return TrialResult(outcome=Outcome.OK, accuracy=0.9, seconds=1.0)
    book = QualityBook(open_study(open_storage(f"sqlite:///{tmp_path}/s.db"), "s"), run,
                       batchnorm=True, tolerance_pp=1.0, seeds=(0, 1, 2))
    bf16 = Config(precision="bf16")
    book.measure(Config())
    book.measure(bf16)
    assert book.verdict(bf16).status == "within"        # on the search's seeds: a screening
    assert not keeps_accuracy(_rec(bf16, "within"), book)
    assert keeps_accuracy(_rec(Config(binding="numactl", allocator="tcmalloc"), "within"), book)
