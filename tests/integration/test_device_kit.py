"""The GPU machine's kit (scripts/device-kit.sh, scripts/device-run.sh, benchmarks/device/run.py),
run here the way it runs there: in a venv that holds torch and the kit's wheels and nothing else,
with the CPU phase only (this machine has no GPU) and a 1-minute budget.

The torch-only environment stands in for the GPU machine's image. Making it installs torch
(about a minute), so it is kept under ~/.cache/autotune like the Intel environment and reused.
The kit for the GPU machine itself (oneCCL and our backend compiled for its torch, issue 45) is
tested in an environment like that machine's: CPython 3.12 and PyPI's torch 2.11.0, the very
wheel it runs (the CUDA build, which imports without a GPU: 4.6 GB once, cached likewise).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

from benchmarks.device.kit import GPU_TORCH, KitError, python312
from autotune.run.runner import free_port
from paths import REPO, TESTS

TORCH_ENV = Path.home() / ".cache" / "autotune" / f"kit-test-torch-{torch.__version__}"
GPU_TORCH_ENV = Path.home() / ".cache" / "autotune" / f"kit-test-torch-{GPU_TORCH}-cp312"


def _run(argv, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, cwd=REPO, **kw)


@pytest.fixture(scope="module")
def torch_only() -> Path:
    """A venv with torch (and torch's own requirements) alone."""
    python = TORCH_ENV / "bin" / "python"
    if not (python.exists() and _run([str(python), "-c", "import torch"]).returncode == 0):
        done = _run([sys.executable, "-m", "venv", "--clear", str(TORCH_ENV)])
        assert done.returncode == 0, done.stderr
        done = _run([str(python), "-m", "pip", "install", "-q", f"torch=={torch.__version__}"],
                    timeout=900)
        assert done.returncode == 0, done.stderr[-2000:]
    return python


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("kit") / "kit"
    done = _run(["scripts/device-kit.sh", "--for-here", str(path)], timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return path


@pytest.fixture(scope="module")
def gpu_torch() -> Path:
    """A venv like the GPU machine's torch environment: CPython 3.12, PyPI's torch 2.11.0."""
    python = GPU_TORCH_ENV / "bin" / "python"
    if not (python.exists() and _run([str(python), "-c", "import torch"]).returncode == 0):
        try:
            py312, _ = python312()
        except KitError as exc:
            pytest.skip(str(exc))
        done = _run([py312, "-m", "venv", "--clear", str(GPU_TORCH_ENV)])
        assert done.returncode == 0, done.stderr
        done = _run([str(python), "-m", "pip", "install", "-q", f"torch=={GPU_TORCH}"], timeout=1800)
        assert done.returncode == 0, done.stderr[-2000:]
    return python


@pytest.fixture(scope="module")
def gpu_kit(tmp_path_factory) -> Path:
    """The kit for the GPU machine, as `scripts/device-kit.sh` makes it (downloads cached)."""
    path = tmp_path_factory.mktemp("gpu-kit") / "kit"
    done = _run(["scripts/device-kit.sh", str(path)], timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    return path


def ranks(python: Path, script: Path, world: int, env: dict) -> list[dict]:
    port = str(free_port())
    procs = [subprocess.Popen([str(python), str(script)], env={
        **env, "RANK": str(r), "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": port, "OMP_NUM_THREADS": "1"}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True) for r in range(world)]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=180)
        assert p.returncode == 0, stderr[-2000:]
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


@pytest.mark.scenario
def test_the_gpu_machines_kit_gives_its_torch_the_ccl_backend(gpu_torch, gpu_kit, tmp_path):
    venv, out = tmp_path / "venv", tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PYTHON": str(gpu_torch), "KIT_VENV": str(venv)}
    done = _run(["scripts/device-run.sh", "--kit", str(gpu_kit), "--cpu-only", "--cpu-budget", "0"],
                env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "device-run: ccl: the kit's module loads beside this torch" in done.stdout
    log = (out / "kit.log").read_text()
    assert "ccl: adopted" in log and "ccl: available (autotune)" in log
    probe = json.loads((out / "probe.json").read_text())
    assert probe["torch_version"] == "2.11.0+cu130" and "ccl" in probe["backends"]
    # ranks of that Python, that torch, the kit's runtime: where device-run.sh put it
    rank_env = {**os.environ, "FI_PROVIDER_PATH": str(venv / "lib" / "libfabric"),
                "PYTHONPATH": str(REPO)}
    got = ranks(venv / "bin" / "python", TESTS / "kit_ccl_rank.py", 2, rank_env)
    assert [g["sum"] for g in got] == [3.0, 3.0] and got[0]["torch"] == "2.11.0+cu130"
    libs = got[0]["libs"]
    assert {Path(p).name for p in libs} >= {"libccl.so.1", "libccl.so.2", "libfabric.so.1"}
    assert all(p.startswith(str(venv / "lib")) for p in libs), libs
    # and a real trial of the built-in workload over ccl, planned and run by autotune there
    trial = _run([str(venv / "bin" / "python"), "-m", "autotune", "run", "--set", "nproc=2",
                  "--set", "threads=1", "--set", "backend=ccl", "--seconds", "2", "--json",
                  "--results", str(tmp_path / "results")], env=rank_env, timeout=300)
    assert trial.returncode == 0, trial.stderr[-2000:]
    result = json.loads(trial.stdout)
    assert result["outcome"] == "ok" and result["measurement"]["throughput"] > 0, result


def test_a_kit_over_the_devices_limit_is_refused_with_its_parts(tmp_path):
    dest = tmp_path / "kit"
    dest.mkdir()
    (dest / "old").write_text("the kit carried last time")
    done = _run(["scripts/device-kit.sh", "--no-ccl", str(dest)],
                env={**os.environ, "KIT_LIMIT_MIB": "1"}, timeout=600)
    assert done.returncode == 2, done.stdout + done.stderr
    err = done.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("device-kit: the kit and the working tree come to")
    assert "over the 1 MiB the device carries" in err[0]
    for part in ("wheels", "lib", "bin", "working tree"):
        assert f"{part} " in err[0] and "MiB" in err[0]
    assert [p.name for p in dest.iterdir()] == ["old"]     # nothing reached DIR


@pytest.mark.scenario
def test_kit_wheels_and_torch_alone_import_every_autotune_module(torch_only, kit, tmp_path):
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHON": str(torch_only),
           "KIT_VENV": str(tmp_path / "venv")}
    # the kit's install, then every module of the package (the ranks', the search's, the CLI's)
    done = _run(["scripts/device-run.sh", "--kit", str(kit), "--cpu-only", "--cpu-budget", "0"],
                env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    script = ("import importlib, pkgutil, autotune, torch\n"
              "names = [m.name for m in pkgutil.walk_packages(autotune.__path__, 'autotune.')\n"
              "         if not m.name.endswith('__main__')]   # those run a command\n"
              "for n in names: importlib.import_module(n)\n"
              "print(len(names), autotune.__file__)")
    imported = _run([str(tmp_path / "venv" / "bin" / "python"), "-c", script], timeout=300)
    assert imported.returncode == 0, imported.stderr[-3000:]
    count, where = imported.stdout.split()
    assert int(count) > 100 and where == str(REPO / "autotune" / "__init__.py")
    # nothing came from this test run's own environment: only torch's venv and the kit's
    paths = _run([str(tmp_path / "venv" / "bin" / "python"), "-c",
                  "import sys, optuna, yaml; print(optuna.__file__, yaml.__file__)"]).stdout
    assert all(p.startswith(str(tmp_path / "venv")) for p in paths.split()), paths


@pytest.mark.scenario
def test_the_kit_runs_its_cpu_phase_here_in_a_minute(torch_only, kit, tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PYTHON": str(torch_only),
           "KIT_VENV": str(tmp_path / "venv")}
    done = _run(["scripts/device-run.sh", "--kit", str(kit), "--cpu-budget", "1m",
                 "--deadline", "5m", "--compare-rounds", "1", "--compare-seconds", "2"],
                env=env, timeout=420)
    # no GPU here: the GPU phase is skipped with one line, the CPU phase runs, and exit 2 says
    # that what was asked was not all done
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        "device-run: no GPU found: the GPU phase was skipped (--cpu-only says that is intended)"]
    assert "gpu: skipped: the probe found no GPU" in done.stdout
    assert sorted(os.listdir(out)) == ["capture.tar", "cpu.tar", "kit.log", "machine.tar",
                                       "probe.json"]
    assert json.loads((out / "probe.json").read_text())["usable_physical_cores"] >= 1
    with tarfile.open(out / "capture.tar") as tar:
        names = tar.getnames()
    assert "capture/capabilities.json" in names and "lscpu.txt" in names
    with tarfile.open(out / "cpu.tar") as tar:
        names = set(tar.getnames())
        summary = json.load(tar.extractfile("search.out"))
        layout = json.load(tar.extractfile("compare-layout.out"))
    assert {"export.out", "report.out", "results/autotune.db"} <= names
    assert summary["trials_run"] >= 1 and summary["recommendation"]["config"]["device"] == "cpu"
    assert layout["rounds"] == 1 and {w["side"] for w in layout["windows"]} == {"A", "B"}
    log = (out / "kit.log").read_text()
    assert "cpu: search: exit 0" in log and "kit: done" in log


@pytest.mark.parametrize("case, setup, message", [
    ("no OUT", lambda kit, env: env.pop("OUT"), "device-run: OUT is unset"),
    ("no kit", lambda kit, env: env.update(KIT="/nonexistent"), "device-run: no kit at"),
    ("a wheel missing", lambda kit, env: [p.unlink() for p in kit.glob("wheels/rich-*.whl")],
     "device-run: wheel missing from"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, case, setup, message):
    kit = tmp_path / "kit"
    (kit / "wheels").mkdir(parents=True)
    for line in (REPO / "benchmarks" / "device" / "wheels.txt").read_text().splitlines():
        if line and not line.startswith("#"):   # empty stand-ins: the check reads names only
            name, version = line.split("==")
            (kit / "wheels" / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").touch()
    env = {**os.environ, "OUT": str(tmp_path / "out"), "KIT": str(kit)}
    setup(kit, env)
    done = _run(["sh", "-c", 'exec scripts/device-run.sh --kit "$KIT"'], env=env, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(message), done.stderr
    assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")
