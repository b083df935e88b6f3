"""Exported commands run for real: they reproduce the configuration, its environment and binding.
(The pure parts are in tests/unit/export/test_export.py.)
"""
from __future__ import annotations

from paths import REPO
import json
import os
import subprocess
import sys
import pytest
from autotune.result import Outcome, TrialResult
from autotune.run.runner import free_port
from autotune.cli import main
from autotune.config import Config
from autotune.export.command import launch_command, render
from autotune.worker.in_force import differences
from autotune.plan.build import build_plan
from autotune.study.storage import describe_study, open_storage, open_study, study_name
from autotune.study.records import record_trial
from results_study import live_topology


def export(capsys, *argv):
    rc = main(["export", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


# A stand-in trainer: joins the process group as a training script would (the backend in force is
# part of the plan), then reports what it has in force.
_PROBE = ("import json, os, torch, torch.distributed as dist; from autotune.worker import in_force; "
          "dist.init_process_group('gloo'); seen = in_force.collect('fp32'); "
          "seen['backend'] = dist.get_backend(); dist.barrier(); dist.destroy_process_group(); "
          "json.dump(seen, open('rank%s.json' % os.environ['RANK'], 'w'))")


@pytest.mark.slow
def test_running_the_exported_command_reproduces_the_configuration(tmp_path, capsys):
    topo = live_topology()
    alloc = next((a for a in ("tcmalloc", "jemalloc") if topo.capabilities.allocators.get(a)),
                 "default")
    config = Config(nproc=2, threads=1, binding="taskset" if topo.capabilities.taskset else "none",
                    allocator=alloc)
    url = f"sqlite:///{tmp_path}/s.db"
    study = open_study(open_storage(url), study_name("cnn", topo))
    describe_study(study, topology=topo, workload="cnn", space={}, settings={})
    record_trial(study, config=config,
                 result=TrialResult(outcome=Outcome.OK, throughput=100.0, accuracy=0.8))
    rc, text, _ = export(capsys, "--storage", url, "--trial", "0", "--seconds", "1")
    assert rc == 0
    # the rendezvous port is the only thing changed: 29500 may be in use by another test
    text = text.replace("MASTER_PORT=29500", f"MASTER_PORT={free_port()}")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    done = subprocess.run(["bash", "-c", text], cwd=run_dir, capture_output=True, text=True,
                          timeout=240, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    plan = build_plan(config, topo, workload="cnn", workdir=str(tmp_path), master_port=1,
                      base_env={})
    for rank, expect in enumerate(plan.request.ranks):
        result = json.loads((run_dir / f"rank{rank}.result.json").read_text())
        in_force = result["in_force"]
        assert differences(expect, in_force) == []
        if expect.cpus is not None:
            assert sorted(in_force["affinity"]) == sorted(expect.cpus)
        assert in_force["num_threads"] == 1 and in_force["allocator"] == alloc


@pytest.mark.slow
def test_exported_environment_and_binding_are_in_force(tmp_path):
    """Independent of the trainer: the exported environment, preload and binding alone put the
    planned affinity, thread count and allocator in force in every rank."""
    topo = live_topology()
    alloc = next((a for a in ("tcmalloc", "jemalloc") if topo.capabilities.allocators.get(a)),
                 "default")
    config = Config(nproc=2, threads=1, binding="taskset" if topo.capabilities.taskset else "none",
                    allocator=alloc)
    program = (sys.executable, "-c", _PROBE)
    text = render(launch_command(config, topo, program=program), "shell")
    text = text.replace("MASTER_PORT=29500", f"MASTER_PORT={free_port()}")
    done = subprocess.run(["bash", "-c", text], cwd=tmp_path, capture_output=True, text=True,
                          timeout=180, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    plan = build_plan(config, topo, workload="cnn", workdir=str(tmp_path), master_port=1,
                      base_env={})
    for rank, expect in enumerate(plan.request.ranks):
        in_force = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert differences(expect, in_force) == []
        assert in_force["num_threads"] == 1 and in_force["allocator"] == alloc
        if expect.cpus is not None:
            assert in_force["affinity"] == sorted(expect.cpus)
