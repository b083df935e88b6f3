"""Shared by the search-level fault and interruption tests: a real `autotune search` in its own
process, on a small space whose configurations each get their own fault (tests/fault_workload.py),
and the checks that nothing it started survives it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import optuna
import psutil

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"

# kmp_blocktime is inert with libgomp, so it only names the fault a configuration gets; nproc=2,
# batch 16 keeps the global batch (and so the accuracy) of the default launch: one accuracy run.
SPACE = """\
name: faults
knobs:
  kmp_blocktime:
    choices: {choices}
fixed:
  nproc: 2
  threads: 1
  batch_size: 16
constraints: []
"""


def write_space(tmp: Path, choices: list[int]) -> Path:
    path = tmp / "space.yaml"
    path.write_text(SPACE.format(choices=json.dumps(choices)))
    return path


def search_env(tmp: Path, faults: dict[int, dict[int, str]] | None = None) -> dict[str, str]:
    """TMPDIR under tmp: the machine lock lives there (in autotune-<uid>/, with XDG_RUNTIME_DIR
    unset), so other searches on this box (other test runs) neither block these nor are blocked
    by them."""
    env = {**{k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}, "TMPDIR": str(tmp), "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join([str(TESTS / "fault_site"), str(TESTS), str(REPO)]),
           "AUTOTUNE_FAULT_LOG": str(tmp / "faults.jsonl"),
           "AUTOTUNE_FAULTS": json.dumps({str(k): {str(r): b for r, b in v.items()}
                                          for k, v in (faults or {}).items()})}
    return env


def search_argv(tmp: Path, space: Path, *extra: str, budget: str = "4m") -> list[str]:
    """Quality runs kept short (2 seeds of 2048 samples): these tests are about faults and
    interruptions, and the quality machinery has its own tests."""
    return [sys.executable, "-m", "autotune", "search", "--workload", "fault_workload:build",
            "--space", str(space), "--budget", budget, "--seconds", "1", "--trial-timeout", "12",
            "--verify-rounds", "1", "--max-verify-rounds", "1", "--quality-samples", "2048", "--quality-seeds", "2",
            "--results", str(tmp / "results"), *extra]


def start_search(tmp: Path, space: Path, faults=None, *extra: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(search_argv(tmp, space, *extra, **kw), cwd=REPO,
                            env=search_env(tmp, faults), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def fault_log(tmp: Path) -> list[dict]:
    path = tmp / "faults.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def load_study(tmp: Path) -> optuna.Study:
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp / 'results' / 'autotune.db'}")
    (summary,) = optuna.get_all_study_summaries(storage)
    return optuna.load_study(study_name=summary.study_name, storage=storage)


def survivors(tmp: Path) -> list[str]:
    """Anything alive that a search under `tmp` started: a process whose environment names a
    result file under tmp (every rank and its descendants inherit it), whose command line names
    tmp, any pid the fault workload logged (ranks, socket holders), and listeners on the
    trials' rendezvous ports."""
    root = str(tmp)
    me = os.getpid()
    found = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if p.pid == me or p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            cmd = " ".join(p.info["cmdline"] or [])
            if root in p.environ().get("AUTOTUNE_RESULT", "") or root in cmd:
                found.append(f"pid {p.pid}: {cmd[:200]}")
        except psutil.Error:
            pass
    entries = fault_log(tmp)
    pids = {e["pid"] for e in entries} | {h for e in entries for h in e.get("holders", [])}
    for pid in pids:
        try:
            p = psutil.Process(pid)
            if p.status() != psutil.STATUS_ZOMBIE and f"pid {pid}:" not in " ".join(found):
                found.append(f"logged pid {pid} alive: {' '.join(p.cmdline())[:200]}")
        except psutil.Error:
            pass
    ports = {int(e["port"]) for e in entries if e.get("port")}
    try:
        conns = psutil.net_connections("tcp")
    except psutil.AccessDenied:  # pragma: no cover - not root
        conns = []
    found += [f"listener on trial port {c.laddr.port}" for c in conns
              if c.laddr and c.laddr.port in ports and c.status == psutil.CONN_LISTEN]
    return found


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"search exited {proc.returncode} waiting for {what}:\n{err}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)
