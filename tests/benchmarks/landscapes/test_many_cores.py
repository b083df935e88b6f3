"""The many-core landscape's plan and rows (benchmarks/landscapes/many_cores_plan.py, many_cores.py), pure:
the 16-core machine's capture planned within its run, and rows worked out from literal windows.
The recording itself runs real trials: tests/integration/test_many_cores_real.py."""
from __future__ import annotations

import pytest

from autotune.config import Config
from autotune.space.resolve import find_space, load_space, resolve
from benchmarks.device.run import parse_args
from benchmarks.landscapes.table import Landscape, math_key
from benchmarks.landscapes.many_cores import finish_rows
from benchmarks.landscapes.many_cores_plan import CUDA_TORCH_EXTRA_S, Planned, make_plan
from benchmarks.landscapes.model_machines import capture_machine
from paths import MACHINES


def sixteen():
    _, topology, hw = capture_machine(str(MACHINES / "h200-emr-16c"), 358.4)
    return topology, hw, resolve(load_space(find_space("cpu")), topology)


def test_the_16_core_plan_measures_every_class_the_issue_names_within_its_run():
    topology, hw, space = sixteen()
    # what is left of a 510 s run after the kit's probe, its capture and the recorder's own
    plan = make_plan(space, topology, budget_s=440, window_s=3.0, seeds=2, hardware=hw,
                     launch_extra_s=CUDA_TORCH_EXTRA_S)
    assert [b.name for b in plan.blocks] == ["anchors", "layouts", "ccl", "math"]
    assert [b.name for b in plan.dropped] == ["amortise", "more"]
    assert plan.estimate_s() <= 400      # room for launches longer than the model says
    configs = [p.config for b in plan.blocks for p in b.configs]
    assert all(p.ruled_out is None for b in plan.blocks for p in b.configs)
    layouts = {(c.nproc, c.threads, c.backend) for c in configs if c.global_batch == 32
               and c.precision == "fp32" and c.allocator == "tcmalloc"}
    assert {(r, 16 // r, "gloo") for r in (2, 4, 8, 16)} <= layouts
    assert {(r, 16 // r, "ccl") for r in (2, 4, 8)} <= layouts
    assert {math_key(c) for c in configs} == {"32:fp32", "32:bf16", "64:fp32", "128:fp32"}
    assert {k for k, _, _ in plan.quality} == {"32:fp32", "32:bf16", "64:fp32", "128:fp32"}
    # each class's quality runs on one rank, as the default launch's math
    assert all(c.nproc == 1 for _, c, _ in plan.quality)
    grid = [p for b in plan.blocks for p in b.configs if p.role == "grid"]
    assert all(p.params[k] in space.knobs[k] for p in grid for k in p.params)
    anchors = plan.blocks[0]
    assert anchors.configs[0].role == "reference:run_cpu"
    assert anchors.launches() == [p for p in anchors.configs] + list(reversed(anchors.configs))
    assert "dropped more" in plan.text() and "estimated" in plan.text()
    # a larger budget takes the batch-128 layouts next
    more = make_plan(space, topology, budget_s=500, window_s=3.0, seeds=2, hardware=hw,
                     launch_extra_s=CUDA_TORCH_EXTRA_S)
    assert [b.name for b in more.blocks][-1] == "amortise"


def test_a_small_budget_keeps_what_fits_in_priority_order():
    topology, hw, space = sixteen()
    plan = make_plan(space, topology, budget_s=150, window_s=3.0, seeds=1, hardware=hw)
    assert plan.estimate_s() <= 150 and plan.blocks and plan.dropped
    names = [b.name for b in plan.blocks + plan.dropped]
    assert sorted(names) == sorted(["anchors", "layouts", "ccl", "math", "amortise", "more"])
    assert math_key(Config()) in {k for k, _, _ in plan.quality}


def window(key, block, round_, thr, outcome="ok"):
    return {"key": key, "block": block, "round": round_, "at": 0.0, "outcome": outcome,
            "throughput": thr, "seconds": 8.0, "cpu_share": 0.95, "reason": "" if thr else "died"}


def test_rows_from_windows_take_medians_and_ratios_to_their_blocks_default_launch():
    d, a, b = Config(), Config(nproc=2, threads=8), Config(nproc=4, threads=4)
    bad = Config(nproc=8, threads=2)
    planned = {c.key(): Planned(role, c, None, 8.0, why) for role, c, why in (
        ("reference:default", d, None), ("grid", a, None), ("grid", b, None), ("grid", bad, None),
        ("grid", Config(nproc=16, threads=2), "violates threads * nproc <= usable_cores"))}
    land = Landscape({"rows": {}, "windows": [
        window(d.key(), "one", 0, 100.0), window(a.key(), "one", 1, 150.0),
        window(bad.key(), "one", 1, None, "crash"), window(a.key(), "one", 2, 170.0),
        window(d.key(), "two", 0, 80.0), window(b.key(), "two", 1, 100.0),
        window(b.key(), "two", 2, 120.0)]})
    finish_rows(land, planned)
    row = land.rows[a.key()]
    assert row["throughput"] == 160.0 and row["x_default"] == pytest.approx(1.6)
    assert [w["round"] for w in row["windows"]] == [1, 2]
    # drift: the default launch fell from 100 to 80; b is measured against its own block's
    assert land.rows[b.key()]["x_default"] == pytest.approx(110 / 80)
    assert land.rows[d.key()]["throughput"] == 90.0
    assert land.rows[bad.key()]["outcome"] == "crash" and land.rows[bad.key()]["throughput"] is None
    infeasible = land.rows[Config(nproc=16, threads=2).key()]
    assert infeasible["outcome"] == "infeasible" and "violates" in infeasible["reason"]


def test_the_device_run_names_its_phases(capsys):
    assert parse_args(["--out", "/tmp/x", "--phases", "landscape"]).phases == ["landscape"]
    assert parse_args(["--out", "/tmp/x"]).phases == ["gpu", "cpu"]
    with pytest.raises(SystemExit) as exc:
        parse_args(["--out", "/tmp/x", "--phases", "landscape,resnet"])
    assert exc.value.code == 2 and "unknown phase resnet" in capsys.readouterr().err


def test_an_unknown_block_is_refused_before_anything_runs(capsys):
    from benchmarks.landscapes.many_cores import main
    with pytest.raises(SystemExit) as exc:
        main(["--dry-run", "--blocks", "layouts,everything"])
    assert exc.value.code == 2 and "--blocks: unknown everything" in capsys.readouterr().err
