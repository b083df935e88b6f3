"""Two fixtures the search tests share: the captured 2-core EPYC with every library found, and
the built-in CPU space resolved on it."""
import dataclasses

import pytest

from autotune.probe import probe
from autotune.probe.topology import Capabilities
from autotune.space.resolve import find_space, load_space, resolve
from paths import MACHINES


@pytest.fixture
def topo():
    t = probe(str(MACHINES / "live-epyc-2cpu"), collect_capabilities=False)
    caps = Capabilities(allocators={"jemalloc": "/lib/libjemalloc.so.2", "tcmalloc": "/lib/libtcmalloc.so.4"},
                        omp_runtimes={"libgomp": None, "libiomp5": "/lib/libiomp5.so"},
                        backends=("gloo",), numactl=True, numactl_membind=True, taskset=True)
    return dataclasses.replace(t, capabilities=caps)


@pytest.fixture
def space(topo):
    return resolve(load_space(find_space("cpu")), topo)
