"""Classify a finished trial: (exit codes, results, log tails) -> (outcome, reason). Pure.

Kept apart from run/runner.py so every rule is unit-tested with literal inputs, no processes.
The rules, in order: a rank that reports bad_config (or exits 78) decides the trial; every rank
delivered a clean result -> ok, whatever happened at exit; otherwise the root-cause rank (the first
to fail on its own, not one that died of a torn connection) decides, by exit code, signal, its own
report and its log.
"""
from __future__ import annotations

import re
import signal
from collections.abc import Collection, Sequence
from typing import Any

from ..plan.launch_plan import EXIT_BACKEND_UNAVAILABLE, EXIT_BAD_CONFIG, EXIT_WORKLOAD_ERROR
from ..result import OUTCOMES, Outcome

_OOM_RE = re.compile(r"MemoryError|Cannot allocate memory|out of memory|std::bad_alloc", re.I)
# How a rank looks when it died only because a peer did: not a root cause.
_VICTIM_RE = re.compile(
    r"Connection (closed|reset) by peer|remote worker (crashing|hanging)|Broken pipe")
_DELIBERATE = (EXIT_BAD_CONFIG, EXIT_BACKEND_UNAVAILABLE, EXIT_WORKLOAD_ERROR)


def describe_exit(rank: int, code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"rank {rank} killed by {name}"
    return f"rank {rank} exited with code {code}"


def declared_outcome(result: Any) -> tuple[str, str] | None:
    """(outcome, reason) a rank's result declares about itself; None when it claims success.

    The worker always writes a result, failures included ("status": "crash", "reason": ...), so
    a failing rank's own words are the best reason there is.
    """
    if not isinstance(result, dict):
        return None
    bad = result.get("bad_config")
    if bad:
        return (Outcome.BAD_CONFIG,
                "; ".join(map(str, bad)) if isinstance(bad, (list, tuple)) else str(bad))
    outcome = result.get("outcome", result.get("status", Outcome.OK))
    if outcome in OUTCOMES and outcome != Outcome.OK:
        why = str(result.get("reason") or result.get("error") or outcome).strip()
        return outcome, why.splitlines()[0][:300] if why else outcome
    return None


def rank_failure(rank: int, code: int | None, result: Any) -> str | None:
    """Why this rank failed on its own account, or None when it did not (or has not exited)."""
    if code is None:
        return None
    if code != 0:
        return describe_exit(rank, code)
    if result is None:
        return f"rank {rank} exited 0 without a result"
    if not isinstance(result, dict):
        return f"rank {rank} exited 0 with a malformed result: {result}"
    if (said := declared_outcome(result)) is not None:
        return f"rank {rank} exited 0 but reported {said[0]}"
    return None


def root_cause(exit_codes: Sequence[int | None], rank_results: Sequence[Any],
               log_tails: Sequence[str], *, exit_order: Sequence[int] = (),
               signalled: Collection[int] = ()) -> int | None:
    """The rank that failed first on its own; ranks that died of a torn connection come last."""
    failing = [r for r, code in enumerate(exit_codes)
               if r not in signalled and rank_failure(r, code, rank_results[r]) is not None]
    if not failing:
        return None
    order = {r: i for i, r in enumerate(exit_order)}

    def key(r: int) -> tuple[bool, int, int]:
        said = declared_outcome(rank_results[r])
        text = (log_tails[r] or "") + (said[1] if said else "")
        victim = exit_codes[r] not in _DELIBERATE and bool(_VICTIM_RE.search(text))
        return (victim, order.get(r, len(order)), r)
    return min(failing, key=key)


def classify(exit_codes: Sequence[int | None], rank_results: Sequence[Any],
             log_tails: Sequence[str], timed_out: bool, *, exit_order: Sequence[int] = (),
             signalled: Collection[int] = (), timeout_s: float | None = None) -> tuple[str, str]:
    """(outcome, reason) of a finished trial.

    exit_codes: per rank, Popen-style (negative = signal), None if never observed to exit.
    rank_results: per rank, the parsed result dict, None (no file) or a str (why it is malformed).
    exit_order: ranks in the order they were seen to exit on their own; signalled: ranks the
    runner itself signalled during teardown (their death is not theirs to answer for).
    """
    results = list(rank_results)
    declared = {r: d for r, res in enumerate(results) if (d := declared_outcome(res)) is not None}
    # A rank running the wrong config makes everything else in the trial moot; no rank reports
    # bad_config because a peer died, so no root-cause search is needed.
    for r, (out, why) in declared.items():
        if out == Outcome.BAD_CONFIG:
            return Outcome.BAD_CONFIG, f"rank {r}: {why}"
    for r, code in enumerate(exit_codes):
        if code == EXIT_BAD_CONFIG:
            return Outcome.BAD_CONFIG, f"rank {r} exited with code {code} (config not in force)"
    if (results and not declared and all(isinstance(res, dict) for res in results)
            and not any(code in _DELIBERATE for code in exit_codes)):
        # Every rank delivered its measurement; a hang or crash in teardown after that is noise.
        return Outcome.OK, ""
    root = root_cause(exit_codes, results, log_tails, exit_order=exit_order, signalled=signalled)
    if root is None and declared:       # it reported failing, then we had to kill it
        r, (out, why) = next(iter(declared.items()))
        return out, f"rank {r}: {why}"
    if root is None and timed_out:
        pending = ", ".join(str(r) for r, res in enumerate(results) if not isinstance(res, dict))
        limit = f" of {timeout_s:g}s" if timeout_s is not None else ""
        return Outcome.TIMEOUT, (f"exceeded the trial timeout{limit}; no result from rank(s) "
                                 f"{pending}")
    if root is None:
        return Outcome.CRASH, "ranks stopped without a result and without an error of their own"
    code = exit_codes[root]
    why = rank_failure(root, code, results[root]) or ""
    said_out, said = declared.get(root, (None, ""))
    if code == EXIT_BACKEND_UNAVAILABLE:
        return Outcome.UNAVAILABLE, f"rank {root}: {said or 'backend unavailable'} (exit {code})"
    if code == EXIT_WORKLOAD_ERROR:
        return Outcome.WORKLOAD_ERROR, f"rank {root}: {said or 'workload error'} (exit {code})"
    if code == -signal.SIGKILL:
        return Outcome.OOM, f"{why} not sent by autotune (likely the out-of-memory killer)"
    if said_out == Outcome.OOM or (code != 0 and _OOM_RE.search(log_tails[root] or "")):
        return Outcome.OOM, f"{why}; {said or 'its log reports memory exhaustion'}"
    if said_out in (Outcome.UNAVAILABLE, Outcome.WORKLOAD_ERROR):
        return said_out, f"{why}: {said}"
    return Outcome.CRASH, f"{why}: {said}" if said else why


# gloo's teardown after the process group was left undestroyed; not an error of the training.
_TEARDOWN_ABORT_RE = re.compile(r"^.*terminate called without an active exception.*$", re.M)
_ERROR_LINE_RE = re.compile(r"Traceback \(most recent call last\)|\b\w*(Error|Exception)\b|"
                            r"terminate called after throwing|Assertion|Segmentation fault|what\(\):")


def _shows_error(text: str) -> bool:
    return bool(_ERROR_LINE_RE.search(_TEARDOWN_ABORT_RE.sub("", text)))


def abort_in_teardown(exit_codes: Sequence[int | None], log_tails: Sequence[str], *,
                      rank0_after_last_metric: str | None,
                      signalled: Collection[int] = ()) -> str | None:
    """A note when a script trial's only failures are SIGABRTs after rank 0 printed its last
    metric line (None otherwise: the crash stands).

    `rank0_after_last_metric`: rank 0's output after its last metric match (None: no match, so
    the abort cannot be placed after the training). Aborting after training finished is gloo's
    teardown ("terminate called without an active exception"); an error printed after the last
    metric line, or an abort before any, is a crash of the training itself.
    """
    aborted = [r for r, c in enumerate(exit_codes) if c == -signal.SIGABRT and r not in signalled]
    if not aborted or rank0_after_last_metric is None:
        return None
    if any(c != 0 and r not in signalled and r not in aborted for r, c in enumerate(exit_codes)):
        return None
    if _shows_error(rank0_after_last_metric):
        return None
    if any(_shows_error(log_tails[r]) for r in aborted if r != 0 and r < len(log_tails)):
        return None
    who = ", ".join(str(r) for r in aborted)
    return (f"rank {who} killed by SIGABRT after rank 0's last metric line (in teardown); "
            "the measurement stands")
