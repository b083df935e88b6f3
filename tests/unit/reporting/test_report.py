"""`autotune report` on a real recorded study (SQLite written by the search loop), and the pure
pieces of the report (Pareto front) on literal rows."""
from __future__ import annotations

import json
from collections import Counter

import optuna
import pytest

from autotune.result import Outcome, TrialResult
from autotune.cli import main
from autotune.config import Config
from autotune.space.resolve import find_space, load_space, resolve
from autotune.quality.evidence import stored_classes
from autotune.reporting.importance import importance
from autotune.reporting.report import build_report
from autotune.reporting.rows import Row, pareto_front
from autotune.study.storage import open_storage, open_study
from autotune.study.records import record_trial
from autotune.plan.feasible import precision_problem
from results_study import live_topology, sha256, study_copy


@pytest.fixture
def db(tmp_path):
    return study_copy(tmp_path / "results")


def load(db) -> optuna.Study:
    return optuna.load_study(study_name=None, storage=f"sqlite:///{db}")


def row(n, thr, acc, feasible=True):
    return Row(number=n, role="search", throughput=thr, x_default=None, accuracy=acc,
               feasible=feasible, changes={})


def test_pareto_front_keeps_only_non_dominated_rows():
    rows = [row(0, 100, 0.80), row(1, 150, 0.78), row(2, 120, 0.77),  # 2 loses to 1 on both
            row(3, 150, 0.78), row(4, 90, 0.81), row(5, 160, None)]
    front = pareto_front(rows)
    assert [r.number for r in front] == [5, 1, 3, 0, 4]
    assert pareto_front([]) == []


def test_report_on_a_recorded_study(db):
    study = load(db)
    rep = build_report(study, top=5)
    trials = study.get_trials()
    fresh = [t for t in trials if t.user_attrs.get("role") != "repeat"]
    assert sum(rep.counts.values()) == len(fresh)
    assert rep.counts == dict(Counter(t.user_attrs["outcome"] for t in fresh))
    rec = study.user_attrs["recommendation"]
    assert rep.recommendation["headline"].startswith("verified speedup")
    # references: the default launch and run_cpu, with their measured throughput
    by_role = {t.user_attrs["role"]: t.values[0] for t in fresh
               if t.user_attrs["role"].startswith("reference:")}
    assert rep.references == by_role
    # top table: fastest first, distinct configurations, ratio to the default launch
    assert len(rep.top) == 5
    thr = [r.throughput for r in rep.top]
    assert thr == sorted(thr, reverse=True)
    best_ok = max(t.values[0] for t in fresh if t.user_attrs["outcome"] == Outcome.OK)
    assert rep.top[0].throughput == best_ok
    default = by_role["reference:default"]
    assert rep.top[0].x_default == pytest.approx(best_ok / default)
    assert all(set(r.changes) <= set(Config().to_dict()) for r in rep.top)
    # quality comes from the study's seeded measurement of the trial's math class
    top = rep.top[0]
    trial = next(t for t in fresh if t.number == top.number)
    evidence = stored_classes(study.user_attrs)[trial.user_attrs["math_class"]]
    assert evidence.sample().n == 3
    assert top.accuracy == pytest.approx(evidence.sample().mean)
    # ...and the report shows the noise floor and each configuration's quality evidence
    assert "noise floor: default launch quality 0.7936 ± 0.0020 over 3 seeds" in rep.text()
    assert rep.to_json()["quality"][0]["facts"]["n"] == 3
    # Pareto: only feasible trials, and none beats another in both objectives
    assert rep.pareto and all(r.feasible for r in rep.pareto)
    for a in rep.pareto:
        assert not any(b.throughput > a.throughput and (b.accuracy or 0) > (a.accuracy or 0)
                       for b in rep.pareto)
    # the recommended config is on the front (it is the fastest feasible one here)
    assert any(r.changes == {k: v for k, v in rec["config"].items() if v != getattr(Config(), k)}
               for r in rep.pareto)
    # importances: a normalised ranking of the sampler's knobs
    assert rep.importances and set(rep.importances) <= set(Config().to_dict())
    assert sum(rep.importances.values()) == pytest.approx(1.0, abs=1e-6)
    # the landscape ignores the OpenMP runtime: it does not lead, and knobs the landscape rewards
    # are among the first three. The backend is not held to that: ccl runs only with several
    # ranks, so among few trials it carries the ranks' effect (PED-ANOVA sees co-occurrence)
    ranked = list(rep.importances)
    assert ranked[0] != "omp_runtime"
    assert set(ranked[:3]) & {"ranks_per_numa_node", "global_batch", "precision", "allocator",
                              "compile", "threads", "binding"}
    # failures grouped by outcome, each with a real example reason
    fails = {f.outcome: f for f in rep.failures}
    assert {Outcome.TIMEOUT, Outcome.INTERRUPTED} <= set(fails)
    # The space offers only what the planner runs: fp16 on a CPU without amx_fp16 (this 2-core
    # Xeon has avx512_fp16 alone) is dropped from the space, not tried, and a ruled-out trial
    # (the sampler may propose one) breaks one of the space's own rules: where oneCCL is built,
    # its dedicated workers on 2 ranks of 2 cores (seen on the 2-core EPYC).
    space_fp16 = "fp16" in study.user_attrs["space"]["knobs"].get("precision", [])
    assert space_fp16 == (precision_problem("fp16", "cpu", live_topology()) is None)
    space = resolve(load_space(find_space("cpu")), live_topology())
    for t in fresh:
        if t.user_attrs["outcome"] == Outcome.INFEASIBLE:
            assert space.violations(t.user_attrs["config"]), t.user_attrs["reason"]
    assert fails[Outcome.TIMEOUT].example == "no step finished within 30s"
    assert fails[Outcome.INTERRUPTED].count == 1
    assert sum(f.count for f in rep.failures) == sum(
        n for outcome, n in rep.counts.items() if outcome != Outcome.OK)

    text = rep.text()
    for part in (study.study_name, rec["headline"], "references: default", "run_cpu",
                 "Pareto front", "which knobs mattered", "failures by reason",
                 f"timeout: {fails[Outcome.TIMEOUT].count}, e.g."):
        assert part in text
    assert json.loads(json.dumps(rep.to_json()))["study"] == study.study_name


def test_cli_report_text_and_json_and_read_only(db, capsys):
    before = sha256(db)
    assert main(["report", "--storage", f"sqlite:///{db}", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "top 3 configurations" in out and "verified speedup" in out
    assert main(["report", "--results", str(db.parent), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["top"]) == 3 or len(data["top"]) == 10
    assert data["storage"] == f"sqlite:///{db}"
    assert data["importances"] and data["pareto"] and data["failures"]
    assert sha256(db) == before, "report must not write to the study"


def test_too_few_trials_for_importances_is_a_message_not_an_error(tmp_path, capsys):
    topo = live_topology()
    study = open_study(open_storage(f"sqlite:///{tmp_path}/s.db"), "autotune-small")
    study.set_user_attr("topology", topo.to_json())
    record_trial(study, config=Config(), role="reference:default",
                 result=TrialResult(outcome=Outcome.OK, throughput=50.0, accuracy=0.8))
    record_trial(study, config=Config(threads=1),
                 result=TrialResult(outcome=Outcome.OK, throughput=60.0, accuracy=0.8),
                 params={"threads": 1},
                 distributions={"threads": optuna.distributions.CategoricalDistribution([1, 2])})
    imp, note = importance(study)
    assert imp is None and "not enough data: 1 feasible search trial" in note
    assert main(["report", "--storage", f"sqlite:///{tmp_path}/s.db"]) == 0
    out = capsys.readouterr().out
    assert "not enough data" in out and "no recommendation stored" in out
    assert "failures by reason:\n  none" in out


def test_trials_measured_on_a_busy_machine_are_flagged_and_not_recommended_alone(tmp_path, capsys):
    """cpu_share below 0.8: rank 0 waited for cores something else used. The report marks such a
    row, and with no budget left to verify, the search does not recommend it on that window."""
    from autotune.recommend.verify import trusted_alone
    from autotune.search.lineup import pick_candidates
    from autotune.study.records import records
    topo = live_topology()
    study = open_study(open_storage(f"sqlite:///{tmp_path}/s.db"), "autotune-busy")
    study.set_user_attr("topology", topo.to_json())
    record_trial(study, config=Config(), role="reference:default", result=TrialResult(
        outcome=Outcome.OK, throughput=50.0, accuracy=0.8, cpu_share=0.97))
    record_trial(study, config=Config(threads=1), result=TrialResult(
        outcome=Outcome.OK, throughput=90.0, accuracy=0.8, cpu_share=0.55))
    record_trial(study, config=Config(allocator="tcmalloc"), result=TrialResult(
        outcome=Outcome.OK, throughput=60.0, accuracy=0.8, cpu_share=0.93))
    assert main(["report", "--storage", f"sqlite:///{tmp_path}/s.db"]) == 0
    out = capsys.readouterr().out
    busy_line = next(line for line in out.splitlines() if "threads=1" in line)
    assert "[busy: cpu_share 0.55]" in busy_line
    assert not any("[busy" in line for line in out.splitlines() if "tcmalloc" in line)
    assert "[busy]: 1 measured while the machine was busy" in out
    assert main(["report", "--storage", f"sqlite:///{tmp_path}/s.db", "--json"]) == 0
    rows = {r["trial"]: r for r in json.loads(capsys.readouterr().out)["top"]}
    assert (rows[1]["busy"], rows[1]["cpu_share"]) == (True, 0.55) and rows[2]["busy"] is False
    candidates = pick_candidates(records(study))
    assert [c.config for c in candidates][:2] == [Config(threads=1), Config(allocator="tcmalloc")]
    assert [trusted_alone(c) for c in candidates[:2]] == [False, True]
