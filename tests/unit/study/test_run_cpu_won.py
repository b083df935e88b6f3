"""A recommendation that is the run_cpu reference's own configuration says so: the GPU machine's
16-core search (2026-11-26) verified run_cpu's settings at 1.40x over the default launch and
printed "1.00x over run_cpu's settings" with nothing to tell the user that the two were one."""
from __future__ import annotations

import json

from autotune.study.records import RUN_CPU_WON, Role, recommends_run_cpu
from paths import REPO

RESULTS = REPO / "benchmarks" / "results" / "device_h200_2026-11-26"


def test_the_16_core_search_recommended_run_cpus_own_settings():
    rec = json.loads((RESULTS / "cpu-search.json").read_text())["recommendation"]
    assert rec["vs_run_cpu"] == 1.0 and recommends_run_cpu(rec)
    assert "run_cpu's settings themselves" in RUN_CPU_WON


def test_a_search_candidate_that_won_is_not_run_cpu():
    rec = json.loads((RESULTS / "cpu-search.json").read_text())["recommendation"]
    rec["candidates"] = [{**c, "role": "search"} for c in rec["candidates"]]
    assert not recommends_run_cpu(rec)
    rec["candidates"] = [{"role": Role.RUN_CPU, "config": {**rec["config"], "threads": 8}}]
    assert not recommends_run_cpu(rec)
