"""A rank's own check of a request before it acts on it (issue 52): the configuration's limits
(config/limits.py, through Config), the request's steps, seconds and samples
(`limits.check_request`) and the planner's rules a rank can judge itself with the CPUs it has
(plan/feasible.rank_problem). The planner checked them too; a rank does not rely on it, since a
request is a file that something else than the planner may have written."""
from __future__ import annotations

from ..config import Config
from ..config.limits import check_request
from ..errors import ConfigError
from ..plan.feasible import rank_problem
from ..plan.launch_plan import WorkerRequest


def request_problem(req: WorkerRequest, cpus: int) -> str | None:
    """Why this rank must not run `req` (None: it may); `cpus`: how many this rank had when it
    started (read then: Intel OpenMP with KMP_AFFINITY pins the main thread to one core once it
    has run, and a later read would be that thread's alone)."""
    try:
        config = Config(**req.config)
        check_request(req.to_json())
    except (ConfigError, TypeError) as exc:
        return str(exc)
    return rank_problem(config, cpus=cpus)
