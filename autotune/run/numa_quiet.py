"""`search --quiet-numa`: the kernel's automatic NUMA balancing off for the length of a search,
and back to what it was afterwards, whatever ends the search.

Why: with kernel.numa_balancing on, the kernel samples pages with hinting faults and migrates
them between nodes while a trial's window is being timed; memory-bound phases ran about 50%
slower with it on (aztec-packages PR #24276), and the slowdown comes and goes with the scanner,
so it lands on some trials and not others. Turning it off is a machine-wide change, made only
for root who asks for it.

How it is put back:
- the context manager's exit (the search ends, fails, or Ctrl-C unwinds it as KeyboardInterrupt);
- a handler for SIGTERM and SIGHUP, whose default would end the process without unwinding: it
  restores, then hands the signal on (to the previous handler, or the default: death);
- atexit, for an interpreter that exits past the context (sys.exit in a thread, ...);
- a marker file written *before* the value is changed, naming the file, the value to put back
  and the process: a search killed with SIGKILL (or a machine that lost power after a reboot
  never sees one: /run is a tmpfs) leaves it, and the next autotune search restores from it
  when its owner is gone (`restore_stale`).
The paths are parameters so that tests use a temporary file in place of the /proc one.
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import tempfile
from dataclasses import dataclass, field
from typing import Any

from ..util import process_identity
from ..errors import MachineStateError

LIVE = "/proc/sys/kernel/numa_balancing"
MARKER = ("/run/autotune-numa_balancing.json" if os.path.isdir("/run")
          else os.path.join(tempfile.gettempdir(), "autotune-numa_balancing.json"))
_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def read_value(path: str | None = None) -> int | None:
    """The setting (0 off, 1 on, 2 tiering, 3 both); None when the kernel has none."""
    path = path or LIVE
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read(16).strip())
    except (OSError, ValueError):
        return None


def _write(path: str, value: int) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(f"{value}\n")


def restore_stale(marker: str | None = None) -> str | None:
    """Put back what a search that died left changed. Returns what happened, in words, or None
    when there was nothing to do; a marker whose process still runs is left alone (its search
    restores it itself)."""
    marker = marker or MARKER
    try:
        with open(marker, encoding="utf-8") as f:
            doc = json.load(f)
        path, value = str(doc["path"]), int(doc["value"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"{marker}: unreadable ({exc}); numa_balancing left as it is"
    owner = process_identity.parse_mark(str(doc.get("owner", "")))
    if owner and owner[0] == process_identity.machine() and process_identity.alive(*owner[1:]):
        return None
    try:
        _write(path, value)
    except OSError as exc:
        return (f"numa_balancing was left off by a search that died (marker {marker}); cannot "
                f"put back {value} in {path} ({exc.strerror or exc}): as root, "
                f"echo {value} > {path}")
    os.unlink(marker)
    return f"numa_balancing put back to {value} in {path}: a search that died had turned it off"


@dataclass
class QuietNuma:
    """numa_balancing 0 while active (root only), restored on every way out."""
    path: str = field(default_factory=lambda: LIVE)      # module globals: tests point them
    marker: str = field(default_factory=lambda: MARKER)  # at temporary files
    euid: int = field(default_factory=lambda: os.geteuid())
    before: int | None = None           # the value to put back; None: nothing changed
    said: list[str] = field(default_factory=list)   # what happened, for the progress lines
    _previous: dict[int, Any] = field(default_factory=dict, repr=False)

    def __enter__(self) -> "QuietNuma":
        if self.euid != 0:
            raise MachineStateError(
                f"--quiet-numa turns kernel.numa_balancing off for the search, which needs root "
                f"(this is uid {self.euid}); run without it, or as root")
        stale = restore_stale(self.marker)
        if stale:
            self.said.append(stale)
        value = read_value(self.path)
        if os.path.exists(self.marker):   # another live search holds it off (0 now)
            self.said.append(f"--quiet-numa: numa_balancing is held off by another search "
                             f"({self.marker}); it puts it back")
        elif value is None:
            self.said.append(f"--quiet-numa: this kernel has no {self.path}: nothing to turn off")
        elif value == 0:
            self.said.append("--quiet-numa: numa_balancing is already off")
        else:
            self._turn_off(value)
        return self

    def _turn_off(self, value: int) -> None:
        doc = {"path": self.path, "value": value, "owner": process_identity.mark()}
        tmp = f"{self.marker}.{os.getpid()}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(doc, f)
            os.replace(tmp, self.marker)   # the marker first: a kill from here on is undone
            _write(self.path, 0)
        except OSError as exc:
            for leftover in (tmp, self.marker):
                if os.path.exists(leftover):
                    os.unlink(leftover)
            raise MachineStateError(
                f"--quiet-numa: cannot turn numa_balancing off in {self.path} "
                f"({exc.strerror or exc}); nothing changed") from None
        self.before = value
        self.said.append(f"numa_balancing off for this search (was {value}); it is put back "
                         "at the end, on Ctrl-C, and by the next search after a crash")
        for sig in _SIGNALS:
            self._previous[sig] = signal.signal(sig, self._on_signal)
        atexit.register(self.restore)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.restore()
        previous = self._previous.get(signum, signal.SIG_DFL)
        if callable(previous):
            previous(signum, frame)
            return
        if previous != signal.SIG_IGN:   # the default: end the process by that signal
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def restore(self) -> None:
        """Put the value back (once) and remove the marker."""
        if self.before is None:
            return
        value, self.before = self.before, None
        try:
            _write(self.path, value)
            os.unlink(self.marker)
        except OSError:
            pass   # the marker stays: the next search puts it back

    def __exit__(self, *exc: Any) -> None:
        self.restore()
        for sig, previous in self._previous.items():
            if signal.getsignal(sig) == self._on_signal:
                signal.signal(sig, previous)
        self._previous.clear()
        atexit.unregister(self.restore)


def disturbs(value: int | None, nodes: int) -> str | None:
    """The warning for a timed trial, when numa_balancing may move pages during it."""
    if not value or nodes < 2:
        return None
    mode = "memory tiering: hot pages move to faster nodes" if value == 2 else "on"
    return (f"numa_balancing is {mode}: the kernel migrates pages between NUMA nodes while "
            "trials are timed (memory-bound phases ran ~50% slower with it on), so timings can "
            "move; as root, `autotune search --quiet-numa` turns it off for the search")
