"""`report` on every search says something about time to accuracy, and ranks only knobs that
varied: stored studies on real SQLite, with literal quality evidence per math class."""
from __future__ import annotations

import optuna
import pytest

from autotune.config import Config
from autotune.result import Outcome, TrialResult
from autotune.reporting import quality as QR
from autotune.quality.evidence import ClassEvidence
from autotune.study.attrs import NOISE_FLOOR
from autotune.study.records import Role, record_trial
from autotune.reporting.importance import importance
from autotune.reporting.report import build_report
from autotune.study.storage import open_storage, open_study

DEFAULT = Config()
BF16 = Config(precision="bf16", nproc=2, threads=1)
BIG = Config(global_batch=256)


def curve(final: float) -> list[list[float]]:
    """A learning curve over 4096 samples that ends at `final`."""
    return [[1024, final * 0.4], [2048, final * 0.7], [3072, final * 0.9], [4096, final]]


def evidence(config: Config, cls: str, finals: tuple[float, ...], curves: bool = True) -> str:
    runs = {seed: {"quality": q, "reason": None, "curve": curve(q) if curves else None,
                   "seconds": 10.0, "samples": None} for seed, q in enumerate(finals)}
    return ClassEvidence(math_class=cls, config=config.to_dict(), runs=runs).to_json()


def quality_study(tmp_path, *, curves: bool = True) -> optuna.Study:
    """The default launch (noisy seeds), an accepted bf16 class that ends below the default's
    quality less 1 pp (accepted within the seed noise), and a rejected big-batch class."""
    study = open_study(open_storage(f"sqlite:///{tmp_path}/q.db"), "autotune-quality")
    finals = {"D": (0.57, 0.52, 0.61), "B": (0.54, 0.50, 0.58), "C": (0.30, 0.31, 0.29)}
    mean = sum(finals["D"]) / 3
    study.set_user_attr(NOISE_FLOOR, {"mean": mean, "sd": 0.045, "n": 3,
                                          "values": list(finals["D"]), "math_class": "D",
                                          "b_noise": None})
    study.set_user_attr("settings", {"max_accuracy_drop": 1.0, "reference_batch": 32})
    for cls, config in (("D", DEFAULT), ("B", BF16), ("C", BIG)):
        study.set_user_attr(f"quality:{cls}", evidence(config, cls, finals[cls], curves))
    for config, cls, thr, role in ((DEFAULT, "D", 50.0, Role.DEFAULT), (BF16, "B", 100.0, "search"),
                                   (BIG, "C", 120.0, "search")):
        record_trial(study, config=config, role=role,
                     result=TrialResult(outcome=Outcome.OK, throughput=thr, math_class=cls))
    return study


def test_target_is_lowered_to_what_every_accepted_class_reaches(tmp_path):
    study = quality_study(tmp_path)
    attrs = study.user_attrs
    assert [QR.class_verdict(attrs, c).status for c in "DBC"] == ["accepted", "accepted", "rejected"]
    goal = QR.target(attrs)
    # the default's 0.5667 less 1 pp = 0.5567 is above bf16's final 0.54: lowered to 0.54
    assert goal.value == pytest.approx(0.54)
    assert goal.why == ("time to target 0.5400: the lowest final quality of an accepted class (B), "
                        "as the default launch's quality 0.5667 less 1 pp = 0.5567 is not reached "
                        "by every accepted class")
    rep = build_report(study)
    times = {q["trial"]: q["facts"]["time_to_target_s"] for q in rep.to_json()["quality"]}
    # both accepted classes reach it (bf16 at its last checkpoint: 4096 samples at 100/s), the
    # rejected class does not
    assert times[1] == pytest.approx(4096 / 100.0) and times[0] is not None and times[2] is None
    text = rep.text()
    assert goal.why in text and "to target" in text
    assert "41.0s" in text and "not reached" in text


def test_target_is_the_default_less_the_tolerance_when_every_accepted_class_reaches_it(tmp_path):
    study = quality_study(tmp_path)
    study.set_user_attr("quality:B", evidence(BF16, "B", (0.60, 0.57, 0.62)))
    goal = QR.target(study.user_attrs)
    assert goal.value == pytest.approx(0.5667 - 0.01, abs=1e-4)
    assert goal.why == "time to target 0.5567: the default launch's quality 0.5667 less 1 pp"


def test_without_learning_curves_the_column_is_dropped_with_its_reason(tmp_path):
    study = quality_study(tmp_path, curves=False)
    goal = QR.target(study.user_attrs)
    assert goal.value is None and "stored no learning curve" in goal.why
    text = build_report(study).text()
    assert "time to target: not shown, the quality runs stored no learning curve" in text
    assert "to target  " not in text and "not reached" not in text
    header = next(line for line in text.splitlines() if "quality ± sd (n)" in line)
    assert header.split()[-3:] == ["verdict", "goodput", "knobs"]


def test_no_noise_floor_means_no_target(tmp_path):
    study = open_study(open_storage(f"sqlite:///{tmp_path}/n.db"), "autotune-none")
    assert QR.target(study.user_attrs).value is None


def test_importances_rank_only_the_knobs_that_varied(tmp_path):
    study = open_study(open_storage(f"sqlite:///{tmp_path}/i.db"), "autotune-imp")
    dists = {"threads": optuna.distributions.CategoricalDistribution([1, 2]),
             "allocator": optuna.distributions.CategoricalDistribution(["default", "tcmalloc"]),
             "backend": optuna.distributions.CategoricalDistribution(["gloo"])}
    record_trial(study, config=Config(), role=Role.DEFAULT,
                 result=TrialResult(outcome=Outcome.OK, throughput=50.0))
    # the fastest 10% (PED-ANOVA's top: trials 17 and 19) all have threads=2 and both allocators
    for n in range(20):
        params = {"threads": 1 + n % 2, "allocator": ("default", "tcmalloc")[n // 2 % 2],
                  "backend": "gloo"}
        thr = 60.0 + 30.0 * (params["threads"] == 2) + n * 0.1
        record_trial(study, config=Config(threads=params["threads"],
                                          allocator=params["allocator"]),
                     result=TrialResult(outcome=Outcome.OK, throughput=thr), params=params,
                     distributions=dists)
    imp, note = importance(study)
    assert imp is not None and set(imp) == {"threads", "allocator"}
    assert next(iter(imp)) == "threads"
    assert note == "not ranked, one value in every trial: backend"
    text = build_report(study).text()
    assert "(not ranked, one value in every trial: backend)" in text
    assert "  backend " not in text
