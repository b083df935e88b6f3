"""What a trial's ranks left behind, read without trusting it: log tails (bounded, junk lines
clipped) and result files (torn or malformed ones read as none)."""
from __future__ import annotations

import json
import os
from typing import Any

from ..plan.launch_plan import LaunchPlan
from ..result import Outcome


LOG_TAIL_LINES = 40


_TAIL_BYTES = 64 << 10


_MAX_LINE = 400          # a junk-printing rank must not blow up the stored log tail


_MAX_TAIL_RANKS = 4


def _clean(line: str) -> str:
    line = "".join(c if c.isprintable() or c == "\t" else "\ufffd" for c in line)
    return line if len(line) <= _MAX_LINE else line[:_MAX_LINE] + " [line truncated]"


def read_tail(path: str, lines: int = LOG_TAIL_LINES) -> str:
    """Last lines of a log, made printable and bounded whatever the rank wrote."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - _TAIL_BYTES))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(_clean(x) for x in text.rstrip("\n").split("\n")[-lines:])


def read_result(path: str) -> Any:
    """dict, None (no file) or a str saying why the file is not a result."""
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        return f"{type(e).__name__}: {e}"
    return data if isinstance(data, dict) else f"expected a JSON object, got {type(data).__name__}"


def _result_of(plan: LaunchPlan, rank: int, code: int | None) -> Any:
    """A rank's result; a user's script writes none, so there exit 0 itself is the success (its
    metric is read afterwards by the trial, from its report or its output)."""
    result = read_result(plan.ranks[rank].result_path)
    if result is None and plan.script and code == 0:
        return {"status": Outcome.OK, "script": True}
    return result
