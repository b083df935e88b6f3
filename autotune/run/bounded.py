"""The user's --metric and --accuracy patterns (or the ones a stored study gives `verify`), run
over a script's output in a worker process with a deadline.

Python's `re` cannot be interrupted: a signal handler runs only once the match returns, and a
pattern such as `(a+)+$` backtracks for ever on one line of a's (measure/script.py already cuts
lines to a fixed length, which bounds the text but not the backtracking). A process can be
killed: past the deadline the match is a failed trial with one line saying why, not a search
that hangs past its budget. A worker costs about a tenth of a second per script trial.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from typing import Any

from ..util.child_python import python_module
from ..util.search_path import child_env
from ..errors import WorkloadError
from ..measure.script import ScriptMetric, last_match_end, script_metric

MATCH_DEADLINE_S = 10.0
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _in_worker(task: str, kwargs: dict[str, Any], patterns: str, deadline_s: float) -> Any:
    env = child_env()
    env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_ROOT, *filter(None, env.get("PYTHONPATH", "")
                                                                .split(os.pathsep))])
    try:
        done = subprocess.run(python_module("autotune.run.bounded"), env=env,
                              input=json.dumps({"task": task, "kwargs": kwargs}),
                              capture_output=True, text=True, timeout=deadline_s)
    except subprocess.TimeoutExpired:   # run() has killed the worker
        raise WorkloadError(f"{patterns}: matching rank 0's output took over {deadline_s:g} s "
                            "(a pattern that backtracks, such as (a+)+$; simplify it)") from None
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise WorkloadError(f"{patterns}: the matching worker failed: {last}") from None
    if "error" in answer:
        raise WorkloadError(answer["error"])
    return answer["value"]


def score_output(*, deadline_s: float = MATCH_DEADLINE_S, **kwargs: Any) -> ScriptMetric:
    """measure.script.script_metric in a worker; a WorkloadError past the deadline."""
    shown = " and ".join(f"{opt} {kwargs[k]!r}" for k, opt in (("metric", "--metric"),
                                                              ("accuracy", "--accuracy"))
                         if kwargs.get(k) is not None)
    if not shown:                  # no pattern: nothing that can hang
        return script_metric(**kwargs)
    value = _in_worker("score", kwargs, shown, deadline_s)
    return ScriptMetric(**{**value, "values": tuple(value["values"])})


def last_metric_end(text: str, metric: str, *, deadline_s: float = MATCH_DEADLINE_S) -> int | None:
    """measure.script.last_match_end in a worker; a WorkloadError past the deadline."""
    return _in_worker("last_end", {"text": text, "metric": metric}, f"--metric {metric!r}",
                      deadline_s)


def _main() -> None:
    request = json.loads(sys.stdin.read())
    try:
        if request["task"] == "score":
            value: Any = asdict(script_metric(**request["kwargs"]))
        else:
            value = last_match_end(**request["kwargs"])
        print(json.dumps({"value": value}))
    except WorkloadError as exc:     # a stored pattern that does not compile
        print(json.dumps({"error": str(exc)}))


if __name__ == "__main__":
    _main()
