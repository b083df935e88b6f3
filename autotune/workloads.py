"""The public module a user's workload imports (`from autotune.workloads import WorkloadSpec`):
what a `mypkg.train:build` entry point returns, and the built-in workloads to build on. The
registry itself runs inside each rank and lives in autotune/worker/workloads.py."""
from .worker.workloads import WorkloadSpec, get_workload, workload_names

__all__ = ["WorkloadSpec", "get_workload", "workload_names"]
