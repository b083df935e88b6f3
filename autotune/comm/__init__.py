"""Communication backends beyond torch's own, used by the worker, by `launch` and by user scripts.

`ccl` is a c10d backend over the oneCCL runtime from PyPI (see comm/ccl/): Intel's bindings are
not on PyPI and stop at torch 2.8, so autotune builds its own, once per torch, and registers it.
"""
