"""A stand-in for a oneCCL rank's use of shared memory (tests/integration/test_shared_machine.py):
it creates /dev/shm/<its pid>:0:0 as libfabric's shm provider does, maps it, says "mapped", then
hangs (the runner times the trial out and kills it, as it kills a hung ccl rank).

`python shm_rank.py [--ignore-sigterm]`: ignore the SIGTERM a rank gets when its runner dies, so
that a kill -9 of the runner leaves the rank's segment with no one to remove it but the record.
"""
from __future__ import annotations

import mmap
import os
import signal
import sys
import time

if "--ignore-sigterm" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
path = f"/dev/shm/{os.getpid()}:0:0"
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
os.ftruncate(fd, 4096)
segment = mmap.mmap(fd, 4096)
print("mapped", path, flush=True)
while True:
    time.sleep(1)
