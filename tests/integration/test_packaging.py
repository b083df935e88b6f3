"""The distribution as a user gets it: `python -m build` on a copy of the checkout, then the wheel,
`pip install .` and `pip install -e .` each into a fresh plain venv (no system site-packages,
nothing of the checkout on its path).

The distribution is `ddp-autotune` (PyPI's `autotune` is someone else's); the import package and
the command stay `autotune`. Each venv gets autotune with `--no-deps`: what is checked is what
the wheel itself carries. To run the installed command for real, the venv then sees this test
interpreter's site-packages (torch, optuna, ...) through a plain path line in a .pth file, which
adds the folder without running its .pth files, so the checkout's own editable install stays out
and `autotune` must come from the venv.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from paths import REPO

DIST = "ddp-autotune"
# What the checkout holds that a build must not see or write into.
IGNORED = shutil.ignore_patterns(".git", ".venv", ".venv-*", "autotune-results", "build", "dist",
                                 "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis")


# A clean venv also means no PYTHONPATH and not the checkout as working directory: `python -c`
# puts the working directory first on sys.path, and either would shadow the installed autotune.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
NEUTRAL_DIR = "/"


def _run(argv) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=300,
                          env=CLEAN_ENV, cwd=NEUTRAL_DIR)
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("pkg") / "src"
    shutil.copytree(REPO, src, symlinks=True, ignore=IGNORED)
    return src


@pytest.fixture(scope="module")
def dist(source, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", out, source])  # sdist, then the wheel from it
    return out


def _venv(path: Path) -> Path:
    _run([sys.executable, "-m", "venv", path])
    python = path / "bin" / "python"
    base = _run([python, "-c", "import sys; print(sys.prefix != sys.base_prefix)"]).stdout
    assert base.strip() == "True"
    return python


def _see_test_dependencies(python: Path) -> None:
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site.stdout.strip()) / "_test_dependencies.pth").write_text("\n".join(sorted(deps)) + "\n")


def _check_command(venv: Path, expected_origin: Path) -> None:
    """The console script exists, runs, and runs the autotune that was installed."""
    python, command = venv / "bin" / "python", venv / "bin" / "autotune"
    assert command.exists(), f"no autotune command in {venv / 'bin'}"
    _see_test_dependencies(python)
    origin = _run([python, "-c", "import autotune; print(autotune.__file__)"]).stdout.strip()
    assert Path(origin).resolve().is_relative_to(expected_origin.resolve()), origin
    version = _run([command, "--version"]).stdout
    assert version.startswith("autotune "), version
    probe = json.loads(_run([command, "probe", "--json"]).stdout)
    assert probe["physical_cores"] >= 1 and probe["schema_version"] >= 1


def test_the_built_wheel_carries_licence_readme_spaces_and_command(dist):
    wheels, sdists = list(dist.glob("*.whl")), list(dist.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in dist.iterdir())
    assert wheels[0].name.startswith("ddp_autotune-")
    with zipfile.ZipFile(wheels[0]) as whl:
        names = whl.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = whl.read(f"{info}/METADATA").decode()
        entry_points = whl.read(f"{info}/entry_points.txt").decode()
        licence = [n for n in names if n.startswith(info) and n.endswith("/LICENSE")]
        assert licence, names
        assert "Apache License" in whl.read(licence[0]).decode()
    assert f"Name: {DIST}\n" in metadata
    assert "License-Expression: Apache-2.0" in metadata
    readme_title = (REPO / "README.md").read_text().splitlines()[0]
    assert "Description-Content-Type: text/markdown" in metadata and readme_title in metadata
    for space in ("cpu.yaml", "gpu.yaml", "README.md"):
        assert f"autotune/space/builtin/{space}" in names
    assert "autotune = autotune.cli:main" in entry_points


def test_the_wheel_installs_into_a_clean_venv(dist, tmp_path):
    python = _venv(tmp_path / "venv")
    _run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", *dist.glob("*.whl")])
    # Before anything else is on its path: what needs no dependency imports from the wheel alone.
    check = ("import importlib.metadata as m, importlib.resources as r, autotune\n"
             f"d = m.distribution('{DIST}')\n"
             "print(d.version == autotune.__version__)\n"
             "print(any(str(f).endswith('LICENSE') for f in d.files))\n"
             "print('knobs:' in (r.files('autotune') / 'space/builtin/cpu.yaml').read_text())\n")
    assert _run([python, "-c", check]).stdout.split() == ["True", "True", "True"]
    _check_command(tmp_path / "venv", tmp_path / "venv")


@pytest.mark.parametrize("editable", [False, True], ids=["pip-install-dot", "pip-install-e-dot"])
def test_pip_install_of_the_checkout_gives_the_command(source, tmp_path, editable):
    python = _venv(tmp_path / "venv")
    target = ["-e", source] if editable else [source]
    _run([python, "-m", "pip", "install", "-q", "--no-deps", *target])
    _check_command(tmp_path / "venv", source if editable else tmp_path / "venv")
