"""Issue 61, hole 3, with real processes: `autotune probe` started from a folder where a co-user
left a `json.py`, with PYTHONPATH=":/opt/x" (what `export PYTHONPATH=$PYTHONPATH:/opt/x` gives
when it was unset). Before: every Python the probe started read the empty entry as the current
folder and ran the planted module. Now the entry never reaches a child."""
from __future__ import annotations

import os
import subprocess
import sys

from paths import REPO

PLANTED = "import os\nopen(os.environ['PLANT_MARKER'] + '.' + str(os.getpid()), 'w').close()\n" \
          "raise ImportError('planted')\n"

# The user's own autotune process ignores the environment's PYTHONPATH (-I), so only its
# children can meet the planted module.
PARENT = ("import sys; sys.path.insert(0, {repo!r}); from autotune.cli import main; "
          "sys.exit(main(['probe', '--json']))")


def test_a_module_planted_in_the_current_folder_never_runs_in_a_child(tmp_path):
    shared = tmp_path / "shared-scratch"
    shared.mkdir()
    (shared / "json.py").write_text(PLANTED)
    marker = tmp_path / "planted-module-ran"
    env = {**os.environ, "PYTHONPATH": ":/opt/x", "PLANT_MARKER": str(marker)}
    done = subprocess.run([sys.executable, "-I", "-c", PARENT.format(repo=str(REPO))],
                          cwd=shared, env=env, capture_output=True, text=True, timeout=300)
    ran = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(marker.name))
    assert ran == [], f"the planted json.py ran in {len(ran)} child(ren)"
    assert done.returncode == 0, done.stderr[-2000:]
    assert '"torch_version"' in done.stdout
