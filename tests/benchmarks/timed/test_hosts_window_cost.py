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


def test_an_out_folder_is_made_or_refused_before_anything_is_measured(tmp_path, capsys):
    """Both window-cost benchmarks measured for minutes, then failed to write into an --out
    folder that did not exist. A missing folder is made first; one that cannot be is one line,
    exit 2, before any host is probed or trial run."""
    from benchmarks.timed import window_cost
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for run, name in ((main, "hosts_window_cost"), (window_cost.main, "window_cost")):
        assert run(["--out", str(blocker / "results")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"{name}: error: --out {blocker / 'results'}: cannot make it a folder "
                       "(Not a directory)"], err
    from benchmarks import out_folder_problem
    assert out_folder_problem(tmp_path / "new" / "deep") is None
    assert (tmp_path / "new" / "deep").is_dir()
