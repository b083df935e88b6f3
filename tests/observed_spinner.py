"""A process measure/observe.py can watch: sets its own OpenMP thread count at import (as textbook scripts
do), then multiplies matrices for a given number of seconds. argv: THREADS SECONDS."""
import os
import sys
import time

os.environ["OMP_NUM_THREADS"] = sys.argv[1]

import torch  # noqa: E402  (the environment must be set before torch loads OpenMP)

a = torch.randn(384, 384)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    a = torch.tanh(a @ a)
