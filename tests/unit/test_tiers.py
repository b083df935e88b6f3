"""The README's test command leaves out the end-to-end scenarios, and only it (tests/conftest.py,
tests/README.md): CI must stay under 20 minutes on 2 cores without losing a scenario silently.
Each case collects, for real, in a pytest of its own (collection only: nothing runs)."""
from __future__ import annotations

import os
import subprocess
import sys

from paths import REPO

SCENARIO = "tests/integration/test_tune_real.py::test_a_whole_search_runs_through_the_pipeline"
FAULTS = "tests/integration/test_faults_search.py::test_the_search_carries_on_to_the_end_and_recommends"
PLAIN = "tests/integration/test_closed_pipe.py::test_head_1_of_a_long_output_gets_its_line_and_no_traceback"
# the folder, with all but three of its files left unimported (a few seconds instead of a dozen)
FOLDER = ("tests/integration", "--ignore-glob=tests/integration/test_[!tfc]*",
          "--ignore-glob=tests/integration/test_t[!u]*",
          "--ignore-glob=tests/integration/test_f[!a]*",
          "--ignore-glob=tests/integration/test_c[!l]*")


def _collect(*args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                           "-p", "no:cacheprovider", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


def test_a_plain_run_of_a_folder_leaves_the_scenarios_out_and_says_how_to_run_them():
    out = _collect("tests/integration/test_tune_real.py")
    assert SCENARIO in out                              # a named file runs its scenarios
    out = _collect(*FOLDER, "-k", "tune_real or faults_search or closed_pipe")
    assert SCENARIO not in out and FAULTS not in out
    assert PLAIN in out
    assert "end-to-end scenarios left out" in out and "-m scenario" in out


def test_a_marker_expression_or_the_variable_brings_them_back():
    assert SCENARIO in _collect(*FOLDER, "-m", "scenario", "-k", "tune_real")
    assert SCENARIO in _collect(*FOLDER, "-k", "tune_real",
                                env={"AUTOTUNE_SCENARIOS": "1"})
    only = _collect(*FOLDER, "-m", "scenario", "-k", "closed_pipe or faults_search or tune_real")
    assert FAULTS in only and "test_closed_pipe" not in only   # -m scenario: the scenarios alone
