"""`python -m autotune.worker` as a plain script: run_cpu launches only *.py files (its --module
flag still insists on a .py name), so this is the train.py a run_cpu user would write."""
import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the checkout
runpy.run_module("autotune.worker", run_name="__main__", alter_sys=True)
