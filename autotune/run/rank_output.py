"""A rank's log tail made safe to store and show: bounded, junk lines clipped (the logs
themselves are read through the trial's folder, run/trial_files.py)."""
from __future__ import annotations

LOG_TAIL_LINES = 40
TAIL_BYTES = 64 << 10
_MAX_LINE = 400          # a junk-printing rank must not blow up the stored log tail
_MAX_TAIL_RANKS = 4


def clean_tail(data: bytes, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` of a log's bytes, each made printable and bounded."""
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(_clean(x) for x in text.rstrip("\n").split("\n")[-lines:])


def _clean(line: str) -> str:
    line = "".join(c if c.isprintable() or c == "\t" else "\ufffd" for c in line)
    return line if len(line) <= _MAX_LINE else line[:_MAX_LINE] + " [line truncated]"

