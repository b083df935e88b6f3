"""The Intel stack for real: IPEX on and off, and torchvision's ResNet-50, in the second environment
(torch 2.8.0 + intel-extension-for-pytorch 2.8.0 + torchvision 0.23) that scripts/intel-env.sh
builds under ~/.cache/autotune. Skipped where that environment was never built; an end-to-end
scenario (tests/README.md): scripts/scenarios.sh builds or reuses the environment, then runs it.

Everything goes through subprocesses of that environment's python: the test process runs the main
environment's torch, which IPEX 2.8 refuses.
"""
from __future__ import annotations

from paths import REPO
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest



def intel_python() -> Path | None:
    """The built environment's python, found the way scripts/intel-env.sh keys it (no building)."""
    key = hashlib.sha256((REPO / "requirements" / "intel.txt").read_bytes()).hexdigest()[:12]
    cache = Path(os.environ.get("AUTOTUNE_CACHE", Path.home() / ".cache" / "autotune"))
    env = cache / f"venv-intel-{key}"
    return env / "bin" / "python" if (env / ".complete").exists() else None


INTEL_PY = intel_python()
pytestmark = [pytest.mark.scenario,
              pytest.mark.skipif(INTEL_PY is None,
                                 reason="intel env not built (run scripts/intel-env.sh)")]


def _env() -> dict[str, str]:
    # this checkout's autotune, whichever checkout the environment was last installed from
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _autotune(python, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "autotune", *args], capture_output=True, text=True,
                          env=_env(), timeout=timeout, cwd=REPO)


def _trial(tmp_path: Path, *args: str) -> tuple[dict, dict]:
    """One real 1-rank trial; returns the CLI's JSON and rank 0's result file."""
    results = tmp_path / "results"
    proc = _autotune(INTEL_PY, "run", "--json", "--results", str(results), "--set", "nproc=1",
                     *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["outcome"] == "ok", out
    (rank0,) = results.glob("trials/*/rank0.json")
    return out, json.loads(rank0.read_text())


@pytest.mark.slow
def test_ipex_on_and_off_are_real_trials_and_in_force_says_which(tmp_path):
    out, rank0 = _trial(tmp_path / "on", "--set", "ipex=on", "--set", "precision=bf16",
                        "--set", "threads=1", "--seconds", "1")
    assert out["config"]["ipex"] == "on" and out["measurement"]["throughput"] > 0
    assert rank0["ipex_applied"] is True
    assert rank0["in_force"]["ipex"].startswith("2.8")
    assert rank0["in_force"]["autocast_dtype"] == "bf16"
    assert rank0["torch_version"].startswith("2.8.0")

    out, rank0 = _trial(tmp_path / "off", "--set", "ipex=off", "--set", "precision=bf16",
                        "--set", "threads=1", "--seconds", "1")
    assert out["config"]["ipex"] == "off" and out["measurement"]["throughput"] > 0
    assert rank0["ipex_applied"] is False and "ipex" not in rank0["in_force"]


@pytest.mark.slow
def test_resnet50_from_torchvision_trains_with_ipex(tmp_path):
    # 224x224 synthetic images; batch 2 keeps one short trial within a minute on 2 cores
    out, rank0 = _trial(tmp_path, "--workload", "resnet50", "--set", "ipex=on",
                        "--set", "global_batch=2", "--set", "threads=1", "--seconds", "1")
    assert rank0["workload"] == "resnet50" and rank0["ipex_applied"] is True
    assert out["measurement"]["samples"] >= 2


@pytest.mark.slow
def test_probe_offers_ipex_in_the_intel_env():
    code = ("from autotune.probe import probe; from autotune.space.resolve import topology_names;"
            "t = probe(); c = t.capabilities;"
            "print(c.ipex_version, c.ipex_problem, topology_names(t)['found_ipex'])")
    proc = subprocess.run([str(INTEL_PY), "-c", code], capture_output=True, text=True,
                          env=_env(), timeout=180, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[:2] == ["2.8.0", "None"], proc.stdout
    assert "('off', 'on')" in proc.stdout


@pytest.mark.slow
def test_probe_explains_an_ipex_that_does_not_match_torch(tmp_path):
    # The real IPEX 2.8.0 package put beside this environment's torch (not 2.8): the probe must
    # say which torch it needs, not crash or exit on IPEX's import-time version check.
    site = Path(subprocess.check_output(
        [str(INTEL_PY), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        text=True).strip())
    for entry in [site / "intel_extension_for_pytorch",
                  *site.glob("intel_extension_for_pytorch-*.dist-info")]:
        (tmp_path / entry.name).symlink_to(entry)
    import torch
    if torch.__version__.startswith("2.8."):
        pytest.skip("this environment's torch matches IPEX 2.8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    proc = subprocess.run([sys.executable, "-m", "autotune", "probe", "--json"],
                          capture_output=True, text=True, env=env, timeout=180, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    ipex = json.loads(proc.stdout)["ipex"]
    assert ipex == {"version": None, "problem": "intel-extension-for-pytorch 2.8.0 needs torch "
                                                f"2.8.*, found {torch.__version__}"}
    run = subprocess.run([sys.executable, "-m", "autotune", "run", "--set", "ipex=on",
                          "--dry-run"], capture_output=True, text=True, env=env, timeout=180,
                         cwd=REPO)
    assert run.returncode == 2 and "needs torch 2.8.*" in run.stderr, run.stdout + run.stderr
