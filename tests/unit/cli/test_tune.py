"""The pipeline composed once (autotune.tune): the request checked once, and a whole real search
driven through `search()` without argparse, as the CLI drives it."""
from __future__ import annotations

import tempfile

import pytest

from autotune.errors import AutotuneError, WorkloadError
from autotune.script.spec import ScriptSpec
from autotune.tune import SearchRequest, check_workload, search


@pytest.mark.parametrize("bad, message", [
    ({"max_accuracy_drop": -1.0}, r"--max-accuracy-drop -1.0: must be a number from 0 to below 100"),
    ({"max_accuracy_drop": 100.0}, r"--max-accuracy-drop 100.0: must be a number from 0 to below"),
    ({"quality_seeds": 1}, r"--quality-seeds 1: at least 2 seeds"),
    ({"quality_samples": 0}, r"--quality-samples 0: must be positive"),
    ({"verify_rounds": 0}, r"--verify-rounds 0: must be at least 1"),
])
def test_request_is_checked_once_with_the_flags_names(bad, message):
    with pytest.raises(AutotuneError, match=message):
        SearchRequest(budget_s=60.0, **bad)


def test_workload_label_names_the_study_and_script_flags_need_a_script():
    from autotune.script.spec import script_from_flags
    assert check_workload("mlp") == "mlp"
    with pytest.raises(WorkloadError, match="--metric reads a script's output"):
        script_from_flags(None, metric="x: ([0-9.]+)")
    with pytest.raises(WorkloadError, match="no_such_module"):
        check_workload("no_such_module:build")




def test_no_workload_named_is_the_default_one_and_excludes_nothing_but_a_command(tmp_path):
    from autotune.config import DEFAULT_WORKLOAD
    from autotune.worker.workloads import WORKLOADS
    assert DEFAULT_WORKLOAD in WORKLOADS
    assert check_workload() == check_workload(None) == DEFAULT_WORKLOAD
    script = tmp_path / "train.py"
    script.write_text("print('x: 1')\n")
    command = ("python3", str(script))
    script = ScriptSpec.scanned(command, metric="x: ([0-9.]+)")
    assert check_workload(None, script).startswith("script-train.py-")
    # naming the default workload is naming one: not the same as naming none
    with pytest.raises(WorkloadError, match="not both"):
        check_workload(DEFAULT_WORKLOAD, script)
