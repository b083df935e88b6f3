"""The layout rule and two guards for the whole suite, so that one stuck test cannot eat a CI run.

- tests/unit/ and tests/benchmarks/ are fast tests without real trials; every test in
  tests/integration/ (real processes, servers, browsers) is marked slow here, and a unit test
  marked slow is an error: it belongs in tests/integration/. tests/ itself is put on sys.path so
  that the shared helpers (paths, results_study, search_harness, ...) import from every folder.

- Every test has a wall-clock limit (AUTOTUNE_TEST_TIMEOUT seconds, 600 unless set; 0 turns it
  off). Past it, the stacks of every thread go to stderr and the test fails with a one-line reason,
  and the suite goes on with the next test.
- A process that a test's body started and left running (a rank, a launcher, a helper) is named
  in a warning and killed with its children when the test ends, so it cannot load the two cores
  under the tests that follow. Servers that fixtures start (PostgreSQL, sshd) are not touched: they
  are started outside the test's body.
"""
from __future__ import annotations

import faulthandler
import os
import signal
import sys
import warnings

import psutil
import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TESTS)

# A suite started in the background (`cmd &` in a script) inherits SIGINT ignored, and so does
# every process it starts: the tests that press Ctrl-C on a search, a launch or the dashboard then
# wait in vain (the dashboard is killed after 30 s, the search runs to its end). A handler set
# here is reset to the default in each child at exec, so Ctrl-C works again in both.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# Likewise SIGHUP under `nohup`: the suite still ignores a hangup (a handler that does nothing),
# but the searches it starts get the default back, as the test that hangs one up expects.
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, lambda signum, frame: None)


def pytest_collection_modifyitems(config, items):
    integration = os.path.join(TESTS, "integration") + os.sep
    for item in items:
        if str(item.path).startswith(integration):
            item.add_marker(pytest.mark.slow)
        elif item.get_closest_marker("slow") or item.get_closest_marker("scenario"):
            raise pytest.UsageError(f"{item.nodeid} is marked slow or scenario: a test with "
                                    "real processes belongs in tests/integration/, not with "
                                    "the fast tests")
    _leave_out_scenarios(config, items)


def _asked_for_folders_only(config) -> bool:
    """True when the run names no test file and no test: `pytest`, `pytest tests`, `pytest -q`."""
    return all(os.path.isdir(arg) for arg in config.args)


def _leave_out_scenarios(config, items):
    """The end-to-end scenarios (`scenario` marker) run only when asked for: by `-m scenario` (or
    any -m), by naming their file or test, or with AUTOTUNE_SCENARIOS=1. A plain `pytest`, the
    README's test command and CI, leaves them out and says so in one line at the end."""
    if config.option.markexpr or os.environ.get("AUTOTUNE_SCENARIOS") == "1" \
            or not _asked_for_folders_only(config):
        return
    left = [item for item in items if item.get_closest_marker("scenario")]
    if left:
        items[:] = [item for item in items if not item.get_closest_marker("scenario")]
        config.hook.pytest_deselected(items=left)
        config.stash[_SCENARIOS_LEFT] = len(left)


_SCENARIOS_LEFT = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    left = config.stash.get(_SCENARIOS_LEFT, 0)
    if left:
        terminalreporter.write_line(
            f"{left} end-to-end scenarios left out (about 20 minutes on 2 cores): "
            "run them with `python -m pytest -m scenario` (tests/README.md)")

LIMIT_S = float(os.environ.get("AUTOTUNE_TEST_TIMEOUT", "600"))


class TestRanTooLong(Exception):
    __test__ = False


def _on_alarm(signum, frame):
    raise TestRanTooLong(f"the test ran past {LIMIT_S:.0f} s (AUTOTUNE_TEST_TIMEOUT); "
                         "the stacks of every thread are above on stderr")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if LIMIT_S <= 0:
        yield
        return
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    faulthandler.dump_traceback_later(LIMIT_S, exit=False, file=sys.stderr)
    signal.setitimer(signal.ITIMER_REAL, LIMIT_S + 0.5)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, previous)


def _descendants() -> dict[int, psutil.Process]:
    try:
        return {p.pid: p for p in psutil.Process().children(recursive=True)}
    except psutil.Error:
        return {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    before = set(_descendants())
    yield
    left = [p for pid, p in _descendants().items() if pid not in before]
    alive = []
    for proc in left:
        try:
            alive.append(f"{proc.pid} {' '.join(proc.cmdline())[:120]}")
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(left, timeout=5)
    if alive:
        warnings.warn(f"{item.nodeid} left {len(alive)} process(es) running; killed: "
                      + "; ".join(alive))
