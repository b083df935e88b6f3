"""Put this folder on PYTHONPATH and every Python started with it runs fault_workload.before_init
first: the only way to make a real worker rank hang before it imports torch or joins the group.
Does nothing unless the process is a rank ($AUTOTUNE_FAULTS set, `--request` in argv)."""
import os
import sys

if "AUTOTUNE_FAULTS" in os.environ and "--request" in sys.argv:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import fault_workload
    fault_workload.before_init()
