"""torch.compile in the plan, the export, a script's scan and the math classes (issue 59): the
private compile cache goes to every rank that compiles and to the exported command, a script or
entry point that compiles itself is not offered the knob twice, and compiled is the default's
math."""
from __future__ import annotations

import dataclasses
import sys

from paths import MACHINES

from autotune.config import Config
from autotune.export.command import launch_command, render
from autotune.plan.build import build_plan
from autotune.probe import probe
from autotune.probe.topology import Capabilities
from autotune.quality.math_class import math_class
from autotune.script.scan import entry_point_compiles, scan_text
from autotune.util.compile_cache import INDUCTOR_ENV, TRITON_ENV


def epyc(**caps):
    topo = probe(str(MACHINES / "live-epyc-2cpu"), collect_capabilities=False)
    return dataclasses.replace(topo, capabilities=Capabilities(
        backends=("gloo",), cxx_compiler="/usr/bin/c++", **caps))


def test_every_rank_of_autotune_gets_the_private_cache_never_the_users(tmp_path, monkeypatch):
    """Compile is a window knob: a launch started eager may serve a compiled window (the first
    10-minute search on a fresh clone: the default launch compiled, a window of the default's
    launch, failed for want of the cache), so every rank of the built-in worker holds the
    private cache from its start, never a folder it inherited; a user's export gets it only when
    it compiles (tests/unit/export)."""
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path))
    topo = epyc()
    base = {"PATH": "/usr/bin", INDUCTOR_ENV: "/tmp/torchinductor_someone"}
    compiled = build_plan(Config(nproc=2, compile=True), topo, workdir="/w", master_port=1,
                          base_env=base)
    for rank in compiled.ranks:
        assert rank.env[INDUCTOR_ENV] == str(tmp_path / "compile" / "inductor")
        assert rank.env[TRITON_ENV] == str(tmp_path / "compile" / "triton")
    assert compiled.env_delta[INDUCTOR_ENV] == str(tmp_path / "compile" / "inductor")
    # an inherited cache folder is the plan's to set: an eager rank gets the private one too
    eager = build_plan(Config(nproc=2), topo, workdir="/w", master_port=1, base_env=base)
    assert all(r.env[INDUCTOR_ENV] == str(tmp_path / "compile" / "inductor")
               for r in eager.ranks)
    assert INDUCTOR_ENV not in eager.env_delta
    eager_export = render(launch_command(Config(), topo, python="python"), "shell")
    assert INDUCTOR_ENV not in eager_export and "AUTOTUNE_RENDEZVOUS" not in eager_export
    # a user's script may compile itself: its ranks get the private cache too
    script = build_plan(Config(), topo, workdir="/w", master_port=1, base_env=base,
                        program=("python", "train.py"), script=True)
    assert script.ranks[0].env[INDUCTOR_ENV] == str(tmp_path / "compile" / "inductor")


def test_a_compiled_export_compiles_as_the_trial_did_and_says_where_the_cache_is(
        tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path))
    cmd = launch_command(Config(compile=True), epyc(), python="python")
    text = render(cmd, "shell")
    assert "--set=compile=True" in text
    assert f"{INDUCTOR_ENV}={tmp_path}/compile/inductor" in text
    assert (f"# torch.compile's cache: {tmp_path}/compile/inductor (and TRITON_CACHE_DIR), "
            "private to you, where the trials compiled this launch's graphs: its first run "
            "starts warm") in text
    assert "torch.compile's cache" not in render(launch_command(Config(), epyc(), python="p"),
                                                 "shell")
    # a script's eager export keeps the cache for a script that compiles itself, and says so
    # (the 4-minute script search said "its first run starts warm" of an eager launch)
    script = render(launch_command(Config(), epyc(), program=("python", "train.py"),
                                   script=True), "shell")
    assert f"{INDUCTOR_ENV}={tmp_path}/compile/inductor" in script
    assert "kept for a script that compiles itself" in script and "starts warm" not in script


def test_code_that_compiles_itself_is_found():
    scan = scan_text("import torch\nmodel = torch.compile(model)\n# torch.compile(x)\n"
                     "@torch.compile\ndef f(x):\n    return x\nm.compile()\nre.compile('x')\n"
                     "torch.compiler.reset()\n", "train.py")
    found = [(f.line, f.knob, f.overrides) for f in scan.findings]
    assert found == [(2, "compile", False), (4, "compile", False), (7, "compile", False)]
    assert "compile" not in scan.overridden   # a {compile} placeholder still drives it


def test_an_entry_point_that_compiles_its_model_is_named(tmp_path, monkeypatch):
    (tmp_path / "selfcompiling_wl.py").write_text(
        "import torch\n\ndef build():\n    return torch.compile(torch.nn.Linear(2, 2))\n")
    (tmp_path / "eager_wl.py").write_text("def build():\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert entry_point_compiles("selfcompiling_wl:build") == \
        f"{tmp_path}/selfcompiling_wl.py:4"
    assert entry_point_compiles("eager_wl:build") is None
    assert entry_point_compiles("cnn") is None
    assert entry_point_compiles("no_such_module_here:build") is None
    sys.modules.pop("selfcompiling_wl", None)


def test_compiled_is_the_default_launchs_math():
    for cfg in (Config(), Config(precision="bf16"), Config(global_batch=64)):
        assert math_class(cfg.with_(compile=True), batchnorm=True) == \
            math_class(cfg, batchnorm=True)
