"""Rank output for `autotune launch`: each line to the rank's log file as written, and to the
terminal prefixed with its rank, like torchrun's `--tee 3 --log-dir DIR`.

One thread per rank reads its pipe; a shared lock keeps lines of different ranks from
interleaving mid-line on the terminal.
"""
from __future__ import annotations

import threading
from typing import BinaryIO, TextIO


def prefix(rank: int, num_ranks: int) -> str:
    """`[rank3]: ` padded so that the ranks' columns line up (torchrun writes `[default3]:`)."""
    return f"[rank{rank}]:".ljust(len(f"[rank{num_ranks - 1}]:") + 1)


class Tee:
    """Copies lines from rank pipes to their log files and to one terminal stream."""

    def __init__(self, echo: TextIO | None) -> None:
        self.echo = echo
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def follow(self, stream: BinaryIO, log_path: str, label: str) -> None:
        t = threading.Thread(target=self._pump, args=(stream, log_path, label), daemon=True,
                             name=f"tee {label.strip()}")
        t.start()
        self.threads.append(t)

    def _pump(self, stream: BinaryIO, log_path: str, label: str) -> None:
        with open(log_path, "ab") as log, stream:
            for raw in iter(stream.readline, b""):
                log.write(raw)
                log.flush()   # the log is the record if autotune itself is killed
                if self.echo is not None:
                    text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                    with self.lock:
                        self.echo.write(f"{label}{text}\n")
                        self.echo.flush()

    def join(self, timeout: float = 5.0) -> None:
        """Wait for the pipes to drain (a descendant holding one open is killed before this)."""
        for t in self.threads:
            t.join(timeout)
