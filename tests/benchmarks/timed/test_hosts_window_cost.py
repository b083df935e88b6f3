"""hosts_window_cost's dear starts (--start-delay): the sitecustomize it puts on a search's
PYTHONPATH waits only in a rank's interpreter (`-m autotune.worker`), and loads cleanly in any
other; bad arguments are one line, exit 2."""
from __future__ import annotations

import os
import subprocess
import sys

from benchmarks.timed.hosts_window_cost import main, slow_start

SITE = "import sitecustomize; print(sitecustomize.__file__)"


def test_the_slow_start_loads_everywhere_and_waits_only_in_a_rank(tmp_path):
    folder = slow_start(0.25, tmp_path)
    env = {**os.environ, "PYTHONPATH": folder}
    plain = subprocess.run([sys.executable, "-c", SITE], env=env, capture_output=True,
                           text=True, timeout=60)
    assert plain.stdout.strip().endswith("slow-start/sitecustomize.py"), plain.stderr
    text = (tmp_path / "slow-start" / "sitecustomize.py").read_text()
    assert "time.sleep(0.25)" in text
    # whose argv waits: the rank's, not the binding shim's that names the rank after its own
    rule = text.split("\n")[2].removeprefix("if ").removesuffix(":")
    for argv, waits in ((["py", "-P", "-m", "autotune.worker", "--request", "r"], True),
                        (["py", "-P", "-m", "autotune.bind", "--", "py", "-P", "-m",
                          "autotune.worker"], False),
                        (["py", "-m", "autotune", "search"], False), (["py", "-c", "x"], False)):
        assert eval(rule, {"argv": argv}) is waits, argv


def test_a_start_delay_without_a_search_or_below_zero_is_one_line(capsys):
    for argv in (["--start-delay", "3"], ["--search", "1m", "--start-delay", "-1"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--start-delay" in err
