"""torch.compile in real trials on this machine (issue 59): a compiled launch of two ranks
compiles before its timed window, its compile cost and cache state measured, a kept window
reuses the compiled model, a window of another batch compiles afresh (no recompile), all of it
in the private cache; a compiler that fails ends the trial with its last line; a co-user's
compile cache folder (a real second uid) is refused before anything compiles.

Compiling costs tens of seconds on 2 shared cores: these are few and short."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from other_user import other_user  # noqa: F401  (the fixture)

from autotune.config import Config
from autotune.probe import probe
from autotune.result import Outcome
from autotune.run.evaluate import live_evaluator
from autotune.run.trial import TrialSettings


@pytest.fixture(scope="module")
def topology():
    topo = probe(None)
    if topo.capabilities.compile_problem:
        pytest.skip(f"this machine cannot compile: {topo.capabilities.compile_problem}")
    return topo


def _settings(tmp_path: Path) -> TrialSettings:
    return TrialSettings(workload="mlp", target_seconds=0.5, timeout_s=600.0,
                         results_dir=str(tmp_path / "results"))


def _one_compiled_trial(topology, tmp_path: Path):
    """One fresh launch of a compiled configuration, its result."""
    ev = live_evaluator(topology, _settings(tmp_path), warm=False)
    try:
        return ev(Config(compile=True, threads=1), "throughput")
    finally:
        ev.close()


def test_a_compiled_launch_compiles_before_its_window_and_keeps_its_graph(topology, tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))
    ev = live_evaluator(topology, _settings(tmp_path))
    try:
        # the launch starts eager, as a search's default launch does; compile is a window knob,
        # so its compiled windows are served by the same ranks (a fresh clone's first search
        # lost its compiled reference here: the eager launch's ranks had no compile cache)
        eager = ev(Config(nproc=2, threads=1), "throughput")
        first = ev(Config(nproc=2, threads=1, compile=True), "throughput")
        kept = ev(Config(nproc=2, threads=1, compile=True), "throughput")
        other_batch = ev(Config(nproc=2, threads=1, compile=True, global_batch=64), "throughput")
    finally:
        ev.close()
    runs = (eager, first, kept, other_batch)
    assert eager.compile_s is None
    assert all(r.outcome == Outcome.OK for r in runs), [r.reason for r in runs]
    # the first window compiled on both ranks in its warm-up, cold (a fresh private cache)
    assert first.compile_s and first.compile_s > 0 and first.compile_cache == "cold"
    assert first.recompiles == 0
    assert first.fixed["warmup"] >= first.compile_s   # inside the warm-up, not the window
    # a window of the same launch and configuration kept the compiled model: nothing compiled
    assert (kept.compile_s, kept.compile_cache, kept.recompiles) == (0.0, "warm", 0)
    assert set(kept.fixed) == {"wait", "model", "warmup"}
    # another batch (another shape) built its model anew and compiled it afresh, not as the
    # 2nd..8th recompile of the first (worker/compiled.forget)
    assert other_batch.compile_s and other_batch.compile_s > 0 and other_batch.recompiles == 0
    inductor = tmp_path / "cache" / "compile" / "inductor"
    assert oct(inductor.stat().st_mode & 0o777) == "0o700" and any(inductor.iterdir())


def test_a_compiler_that_fails_ends_the_trial_with_its_last_line(topology, tmp_path,
                                                                 monkeypatch):
    bad = tmp_path / "badcxx"
    bad.write_text("#!/bin/sh\necho 'badcxx: error: refuses every file' >&2\nexit 1\n")
    bad.chmod(0o755)
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", str(bad))   # after the probe: it passed this machine's compiler
    out = _one_compiled_trial(topology, tmp_path)
    assert out.outcome == Outcome.CRASH
    assert "torch.compile failed: InvalidCxxCompiler: No working C++ compiler found in " \
           f"torch._inductor.config.cpp.cxx: (None, '{bad}')" in out.reason


def test_a_co_users_compile_cache_folder_is_refused_before_anything_compiles(
        topology, tmp_path, monkeypatch, other_user):
    # a shared folder like /tmp (root's, sticky, open to all), where the co-user came first
    shared = Path(tempfile.mkdtemp(dir="/tmp", prefix="at59-"))
    try:
        os.chmod(shared, 0o1777)
        other_user.run("mkdir", "-m", "0777", "-p", f"{shared}/compile/inductor",
                       f"{shared}/compile/triton")
        monkeypatch.setenv("AUTOTUNE_CACHE", str(shared))
        out = _one_compiled_trial(topology, tmp_path)
        assert out.outcome == Outcome.UNAVAILABLE
        assert (f"torch.compile failed: refusing torch.compile's cache {shared}/compile/inductor: "
                f"{shared}/compile/inductor belongs to uid {other_user.uid}, not to you or root"
                ) in out.reason
        assert not any((shared / "compile" / "inductor").iterdir())   # nothing of ours in it
    finally:
        import shutil
        shutil.rmtree(shared, ignore_errors=True)
