"""Kills by marker that could not reach their host, owed until they do (run/spanning.py's
teardown records them).

A host that is cut off while a launch across hosts runs there (its link or a switch down, not
the machine itself) cannot be told to end that launch's processes: the kill by marker there fails
(ssh: no route to host, or no answer). Those processes may live on: the ssh session on that side
never hears that the runner's end closed, so the ranks' lifeline does not end them either. Each
such kill is kept here and started again in the background whenever a launch across hosts starts
or ends (never waited for: a host still down would cost each trial ssh's connect timeout), until
one succeeds; when the launches end (WarmLaunches.close), the kills still owed get a last try,
waited for, and the hosts still unreached are returned to be said.
"""
from __future__ import annotations

import contextlib
import subprocess
import time

# How long the last try, when the launches end, waits for the hosts still owed a kill: more than
# ssh's connect timeout (plan/cluster.Cluster.ssh: 10 s) and a kill's grace.
SETTLE_S = 20.0


class OwedKills:
    """(host, trial marker, the kill's argv) -> its retry running now (None: none), for every
    launch whose kill by marker failed on that host."""

    def __init__(self) -> None:
        self._owed: dict[tuple[str, str, tuple[str, ...]], subprocess.Popen[bytes] | None] = {}

    def owe(self, host: str, marker: str, argv: tuple[str, ...]) -> None:
        self._owed.setdefault((host, marker, argv), None)

    def owed(self) -> list[tuple[str, str]]:
        """(host, trial marker) of every kill still owed."""
        return sorted({(host, marker) for host, marker, _argv in self._owed})

    def _reap(self) -> None:
        """A retry that succeeded: that kill is no longer owed."""
        for key, proc in list(self._owed.items()):
            if proc is not None and proc.poll() == 0:
                del self._owed[key]

    def retry(self) -> None:
        """Reap the retries that ended and start one for every kill still owed that has none
        running."""
        self._reap()
        for key, proc in list(self._owed.items()):
            if proc is None or proc.poll() is not None:
                self._owed[key] = subprocess.Popen(key[2], stdin=subprocess.DEVNULL,
                                                   stdout=subprocess.DEVNULL,
                                                   stderr=subprocess.DEVNULL,
                                                   start_new_session=True)

    def settle(self, wait_s: float = SETTLE_S) -> list[tuple[str, str]]:
        """A last try of every kill owed, waited for up to `wait_s`: (host, marker) of those
        still unreached (their retries stopped: nothing of ours is left running here)."""
        deadline = time.monotonic() + wait_s
        if self._owed:
            self.retry()
        while self._owed and time.monotonic() < deadline:
            time.sleep(0.2)
            if all(p is not None and p.poll() is not None for p in self._owed.values()):
                self.retry()   # drops the kills that reached their host, tries the others again
        self._reap()
        left = self.owed()
        for proc in self._owed.values():
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait()
        self._owed.clear()
        return left


# One per runner: a kill owed by one launch is retried whenever any other starts or ends.
OWED = OwedKills()


def unreached_line(owed: list[tuple[str, str]]) -> str:
    """What the user is told of the hosts a kill by marker never reached."""
    return "; ".join(f"host {host} could not be reached to end trial {marker}'s processes there "
                     f"(cut off while it ran): once it is back, run there `python -m "
                     f"autotune.run.remote kill {marker}`" for host, marker in owed)
