"""torch.compile's private cache (util/compile_cache.py): made 0700 under autotune's own cache,
refused where someone else could change it. A co-user's folder (a real second uid) is refused
in tests/integration/test_compile_cache_attack.py."""
from __future__ import annotations

import os
import stat

from autotune.util.compile_cache import (INDUCTOR_ENV, TRITON_ENV, cache_problem,
                                         compile_cache_env)


def test_both_caches_live_under_autotunes_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "c"))
    env = compile_cache_env()
    assert env == {INDUCTOR_ENV: str(tmp_path / "c" / "compile" / "inductor"),
                   TRITON_ENV: str(tmp_path / "c" / "compile" / "triton")}
    assert cache_problem(env) is None
    for path in env.values():
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "c" / "compile").st_mode) == 0o700


def test_unset_relative_or_open_folders_are_refused(tmp_path):
    env = compile_cache_env(tmp_path / "cc")
    assert cache_problem({INDUCTOR_ENV: env[INDUCTOR_ENV]}) == (
        "TRITON_CACHE_DIR is not set, and torch's default under /tmp can be created first by "
        "another user; run the exported command, which sets it")
    assert cache_problem({**env, INDUCTOR_ENV: "cache/inductor"}) == \
        "TORCHINDUCTOR_CACHE_DIR=cache/inductor is not an absolute path"
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)   # anyone could plant kernels in it
    problem = cache_problem(compile_cache_env(open_dir))
    assert problem == (f"refusing torch.compile's cache {open_dir}/inductor: {open_dir} is "
                       "writable by others; fix: set AUTOTUNE_CACHE to a folder only you can "
                       "write")
