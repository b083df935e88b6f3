"""Rank output: each rank's pipe copied to its log file, and for `autotune launch` to the terminal
prefixed with its rank, like torchrun's `--tee 3 --log-dir DIR`.

One thread per rank reads its pipe in chunks of at most CHUNK bytes (reading by line held a whole
line in memory, and output with no newline is one line that grows without bound); a shared lock
keeps lines of different ranks from interleaving mid-line on the terminal. A trial's log is capped
(CappedLog): a rank printing junk for an hour must not fill the disk under the results folder.
"""
from __future__ import annotations

import collections
import signal
import threading
from typing import BinaryIO, TextIO

from ..util.private_files import private_file

CHUNK = 64 << 10            # the most read from a pipe, or echoed as one line, at once
MAX_LOG_BYTES = 64 << 20    # a trial's rank log stops growing here...
KEEP_TAIL = 1 << 20         # ...and keeps only its last MiB, where errors and metrics are


def prefix(rank: int, num_ranks: int) -> str:
    """`[rank3]: ` padded so that the ranks' columns line up (torchrun writes `[default3]:`)."""
    return f"[rank{rank}]:".ljust(len(f"[rank{num_ranks - 1}]:") + 1)


class CappedLog:
    """A log file written up to `cap` bytes; past it, a line says so, the rest is counted and its
    last `tail` bytes are kept in memory, written when the log is closed (where the runner reads
    the failing rank's tail and a script's last metric lines)."""

    def __init__(self, log: str | int, cap: int | None = MAX_LOG_BYTES,
                 tail: int = KEEP_TAIL) -> None:
        """`log`: a path (opened to append, a link refused) or an fd open for writing (a
        trial's, created in its checked folder: run/trial_files.py)."""
        fd = log if isinstance(log, int) else private_file(log, append=True)
        self.file = open(fd, "ab")
        self.cap, self.tail = cap, tail
        self.written = 0
        self.dropped = 0
        self.kept: collections.deque[bytes] = collections.deque()
        self.kept_bytes = 0

    def write(self, data: bytes) -> None:
        if self.cap is not None and self.written + len(data) > self.cap:
            room = max(0, self.cap - self.written)
            self._write(data[:room])
            if not self.dropped and not self.kept:
                self._write(f"\n[autotune: this log is cut at {self.cap >> 20} MiB: what follows "
                            f"is only the last {self.tail >> 10} KiB of the rank's output]\n"
                            .encode())
            self._keep(data[room:])
            return
        self._write(data)

    def _write(self, data: bytes) -> None:
        self.file.write(data)
        self.file.flush()       # the log is the record if autotune itself is killed
        self.written += len(data)

    def _keep(self, data: bytes) -> None:
        self.kept.append(data)
        self.kept_bytes += len(data)
        while self.kept_bytes - len(self.kept[0]) >= self.tail:
            self.dropped += len(self.kept[0])
            self.kept_bytes -= len(self.kept.popleft())

    def close(self) -> None:
        if self.kept:
            data = b"".join(self.kept)
            cut = max(0, len(data) - self.tail)
            self.file.write(f"[autotune: {self.dropped + cut} bytes of output dropped here]\n"
                            .encode() + data[cut:])
        self.file.close()


class Tee:
    """Copies rank pipes to their log files and, line by line, to one terminal stream."""

    def __init__(self, echo: TextIO | None, *, cap: int | None = None) -> None:
        self.echo = echo
        self.cap = cap
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def follow(self, stream: BinaryIO, log: str | int, label: str) -> None:
        """Copy `stream` to `log` (a path or an fd, as CappedLog takes) until it ends."""
        t = threading.Thread(target=self._pump, args=(stream, log, label), daemon=True,
                             name=f"tee {label.strip() or log}")
        # Started with Ctrl-C and SIGTERM blocked (a thread inherits the mask): the kernel then
        # delivers them to the main thread only, and a cleanup that holds them (the runner's
        # _signals_held) is not cut short by one landing on this thread.
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            t.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        self.threads.append(t)

    def _pump(self, stream: BinaryIO, where: str | int, label: str) -> None:
        log = CappedLog(where, self.cap)
        pending = b""               # the start of a line not yet echoed (at most CHUNK bytes)
        try:
            with stream:
                while chunk := stream.read1(CHUNK):     # type: ignore[attr-defined]
                    log.write(chunk)
                    if self.echo is not None:
                        pending = self._echo(label, pending + chunk)
            if self.echo is not None and pending:
                self._echo(label, pending + b"\n")
        finally:
            log.close()

    def _echo(self, label: str, data: bytes) -> bytes:
        """Echo every whole line of `data` (and a line longer than CHUNK in pieces); returns the
        unfinished rest."""
        *whole, rest = data.split(b"\n")
        lines = [ln[i:i + CHUNK] for ln in whole for i in range(0, max(len(ln), 1), CHUNK)]
        while len(rest) > CHUNK:
            lines.append(rest[:CHUNK])
            rest = rest[CHUNK:]
        if lines:
            text = "".join(f"{label}{raw.decode('utf-8', errors='replace').rstrip(chr(13))}\n"
                           for raw in lines)
            with self.lock:
                assert self.echo is not None
                self.echo.write(text)
                self.echo.flush()
        return rest

    def join(self, timeout: float = 5.0) -> None:
        """Wait for the pipes to drain (a descendant holding one open is killed before this)."""
        for t in self.threads:
            t.join(timeout)
