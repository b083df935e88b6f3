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


def evidence(config: Config, cls: str, finals: dict[int, float], curves: bool = True) -> str:
    runs = {seed: {"quality": q, "reason": None, "curve": curve(q) if curves else None,
                   "seconds": 10.0, "samples": None} for seed, q in finals.items()}
    return ClassEvidence(math_class=cls, config=config.to_dict(), runs=runs).to_json()


# seeds 0-2 (the search's) and 100-102 (a confirmation's) of each class
FINALS = {"D": {0: 0.57, 1: 0.52, 2: 0.61, 100: 0.50, 101: 0.50, 102: 0.50},
          "B": {0: 0.566, 1: 0.516, 2: 0.606, 100: 0.496, 101: 0.497, 102: 0.495},
          "C": {0: 0.30, 1: 0.31, 2: 0.29}}


def quality_study(tmp_path, *, curves: bool = True) -> optuna.Study:
    """The default launch (noisy seeds), a bf16 class shown within 1 pp on six paired seeds (its
    drop is 0.4 pp on each) whose final quality over all of them ends below the noise floor's
    mean less 1 pp (its confirmation's seeds trained lower on both sides), and a big-batch class
    shown beyond."""
    study = open_study(open_storage(f"sqlite:///{tmp_path}/q.db"), "autotune-quality")
    floor = [FINALS["D"][s] for s in (0, 1, 2)]
    study.set_user_attr(NOISE_FLOOR, {"mean": sum(floor) / 3, "sd": 0.045, "n": 3,
                                      "values": floor, "math_class": "D", "b_noise": None})
    study.set_user_attr("settings", {"max_accuracy_drop": 1.0, "reference_batch": 32})
    for cls, config in (("D", DEFAULT), ("B", BF16), ("C", BIG)):
        study.set_user_attr(f"quality:{cls}", evidence(config, cls, FINALS[cls], curves))
    for config, cls, thr, role in ((DEFAULT, "D", 50.0, Role.DEFAULT), (BF16, "B", 100.0, "search"),
                                   (BIG, "C", 120.0, "search")):
        record_trial(study, config=config, role=role,
                     result=TrialResult(outcome=Outcome.OK, throughput=thr, math_class=cls))
    return study


def test_the_report_judges_each_stored_class_by_the_paired_test(tmp_path):
    attrs = quality_study(tmp_path).user_attrs
    d, b, c = (QR.class_verdict(attrs, cls) for cls in "DBC")
    assert (d.status, b.status, c.status) == ("within", "within", "beyond")
    # decided by its confirmation's look (seeds 100-102, stored before looks had plans: judged
    # on the pairs it ran) at the look's level, not pooled with the search's seeds
    assert b.gate.n == 3 and b.gate.look == 1
    assert b.claim.startswith("within 1 pp (97.5% upper bound of the drop 0.")
    assert c.claim == "beyond 1 pp: seeds 0, 1, 2 diverged (drop up to 32.0 pp, 3 paired seeds)"


def test_target_is_the_default_less_the_tolerance_and_every_accepted_class_reaches_it(tmp_path):
    study = quality_study(tmp_path)
    attrs = study.user_attrs
    goal = QR.target(attrs)
    # the default's mean over its six seeds, 0.5333, less 1 pp
    assert goal.value == pytest.approx(0.52333, abs=1e-4)
    assert goal.why == "time to target 0.5233: the default launch's quality 0.5333 less 1 pp"
    rep = build_report(study)
    times = {q["trial"]: q["facts"]["time_to_target_s"] for q in rep.to_json()["quality"]}
    # both accepted classes reach it, the class beyond does not
    assert times[0] is not None and times[1] is not None and times[2] is None
    text = rep.text()
    assert goal.why in text and "to target" in text and "not reached" in text
    # the verdict column says what each class showed
    table = text[text.index("quality ± sd (n)"):text.index("Pareto front")].splitlines()
    rows = {line.split()[0]: line for line in table if line.strip()[:1].isdigit()}
    assert "beyond" in rows["2"] and "within" in rows["1"]


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


def test_a_study_of_the_older_rule_keeps_its_figures_and_says_not_shown_until_judged_again(
        tmp_path):
    """Issue 50's bad input: a study stored before the paired rule keeps every figure; its
    "accepted" reads "not shown (older rule)" wherever its class has no stored runs to judge
    again, its recommendation's accuracy says so, and reading it writes nothing."""
    from autotune.quality.verdict import recommendation_claims, stored_verdict
    study = open_study(open_storage(f"sqlite:///{tmp_path}/old.db"), "autotune-old")
    record_trial(study, config=DEFAULT, role=Role.DEFAULT,
                 result=TrialResult(outcome=Outcome.OK, throughput=50.0, accuracy=0.94))
    old = TrialResult(outcome=Outcome.OK, throughput=90.0, accuracy=0.92, quality="accepted",
                      math_class="B", quality_sd=0.007, quality_n=3,
                      quality_verdict="drop +2.02 pp, within 1 pp + noise 1.26 pp")
    record_trial(study, config=BF16, role="search", result=old)
    rec = {"config": BF16.to_dict(), "headline": "verified speedup 2.56x over the default launch",
           "accuracy": 0.924, "default_accuracy": 0.944, "speedup": 2.56}
    study.set_user_attr("recommendation", rec)
    before = ({k: v for k, v in study.user_attrs.items()},
              [t.user_attrs for t in study.trials])
    v = stored_verdict(old)
    assert v.label == "not shown (older rule)" and not v.accepted and not v.contends
    assert recommendation_claims(rec) == [
        "accuracy not shown (older rule): judged before the paired test; `autotune verify "
        "--quality` judges it again"]
    text = build_report(study).text()
    row = next(line for line in text.splitlines() if "90.0" in line and "precision=bf16" in line)
    assert "  ?  " in row                              # the "tol" column: nothing shown
    assert "accuracy not shown (older rule)" in text
    assert stored_verdict(TrialResult(outcome=Outcome.OK, quality="rejected")).label == \
        "beyond (older rule)"
    again = optuna.load_study(study_name="autotune-old", storage=f"sqlite:///{tmp_path}/old.db")
    assert ({k: v for k, v in again.user_attrs.items()},
            [t.user_attrs for t in again.trials]) == before
