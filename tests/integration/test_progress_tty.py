"""The live progress bar of a real short search, seen through a pseudo-terminal as a person sees
it, and the plain lines the same search gives to a pipe and in CI."""
from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from paths import REPO

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# a script whose every run takes a while, so the bar has time to tick during one trial
SCRIPT = "import time\ntime.sleep(1.5)\nprint('throughput: 100 samples/s', flush=True)\n"


def search_argv(tmp: Path, name: str) -> list[str]:
    script = tmp / "steady.py"
    script.write_text(SCRIPT)
    return [sys.executable, "-m", "autotune", "search", "--budget", "60s", "--max-trials", "3",
            "--verify-rounds", "1", "--max-verify-rounds", "1", "--results", str(tmp / name),
            "--metric", r"throughput: ([0-9.]+)", "--", sys.executable, str(script)]


def env_for(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    # TMPDIR under tmp keeps the machine lock private to the test; the terminal is a capable one
    # whatever runs the suite (a CI runner may say TERM=dumb, which keeps the plain lines)
    return {**env, "TMPDIR": str(tmp), "PYTHONPATH": str(REPO), "TERM": "xterm-256color",
            **extra}


def under_pty(argv: list[str], env: dict[str, str], timeout: float = 240) -> tuple[int, str]:
    """Run argv with stdin, stdout and stderr on one pseudo-terminal 140 columns wide; return
    its exit code and everything it drew."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=REPO,
                            close_fds=True)
    os.close(slave)
    out = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:   # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        return proc.wait(timeout=timeout), out.decode("utf-8", errors="replace")
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()


def test_a_terminal_gets_the_live_bar_with_every_element(tmp_path):
    rc, drawn = under_pty(search_argv(tmp_path, "tty"), env_for(tmp_path))
    assert rc == 0, drawn[-3000:]
    assert "\x1b[" in drawn                      # drawn in place, with cursor control
    frames = [ANSI.sub("", f) for f in re.split(r"[\r\n]", drawn)]
    bars = [f for f in frames if " ETA " in f and "━" in f]
    assert bars, drawn[-3000:]
    # each phase the search went through, the budget with its ETA, the trial number, the best
    # so far against the default launch, and what runs now in short
    for phase in ("probe |", "search |", "verify |"):
        assert any(phase in f for f in bars), phase
    assert any(re.search(r"\d\d:\d\d/01:00 ETA \d\d:\d\d", f) for f in bars)
    assert any("| trial 2 |" in f for f in bars)
    assert any("| best 1.00x (default launch) |" in f for f in bars)
    assert any(f.startswith("  now: trial 0 (reference:default): default launch") for f in frames)
    assert any(f.startswith("  now: round 1/1 (") for f in frames)
    # a silent 1.5 s run still moves: several frames while trial 0 alone ran
    during = {f for f in bars if "search |" in f and "| trial 0 |" in f}
    assert len(during) >= 2, during
    # the per-trial lines still scroll above the bar, and the summary follows it
    assert "[00:" in drawn and "-> 100 (--metric, higher is better) (1.00x default)" in drawn
    assert "search stopped (max_trials)" in drawn


@pytest.mark.scenario
def test_a_pipe_and_ci_get_the_plain_lines(tmp_path):
    piped = subprocess.run(search_argv(tmp_path, "pipe"), env=env_for(tmp_path), cwd=REPO,
                           capture_output=True, text=True, timeout=240)
    assert piped.returncode == 0, piped.stderr[-3000:]
    rc, ci = under_pty(search_argv(tmp_path, "ci"), env_for(tmp_path, CI="true"))
    assert rc == 0, ci[-3000:]
    assert "search stopped (max_trials)" in ci
    # the terminal also shows stdout's summary after the progress: only the progress is checked
    for err in (piped.stderr, ci.split("search stopped")[0]):
        assert "━" not in err and " ETA " not in err and "now:" not in err
        lines = [ln for ln in err.replace("\r\n", "\n").splitlines() if ln.strip()]
        assert any(ln.startswith("              -> ") for ln in lines)
        # every line is one of today's: header, machine, a note, a clocked event, a result, and
        # under a result what the processes did not show in force (a sampling on a busy machine
        # can miss a library the rank maps a moment later, or a note that another process took
        # the cores while the trial was measured, so it was measured again)
        for ln in lines:
            assert re.match(r"(autotune search: |machine: |  note: |\[\d\d:\d\d/01:00\] |"
                            r" {14}-> | {17}did not act: | {17}note: )", ln), ln
    assert "\x1b[" not in piped.stderr
