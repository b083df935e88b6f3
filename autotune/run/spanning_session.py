"""A launch across hosts kept between windows: run/session.py's counterpart for ranks started by
ssh, mpirun or srun (run/spanning.py starts and watches them; run/warm.py keeps them).

Its first window is started like any trial across hosts; each next window of the same launch is
one request file in its trial folder, which every rank on every host waits for (the folder is on
the file system the hosts share, checked by each rank on its own host; every request and result
carries the launch's token, which reached the ranks through a 0600 file of that folder:
util/channel.py). The same guarantees as a fresh trial across hosts: a window past its timeout,
a rank that fails, or a launcher that ends (its host died, its ssh connection dropped, a rank
was killed while idle) tears the launch down on every host: the launchers are stopped here, the
kill by marker runs on each host, and the ranks' lifeline (the launchers' stdin, held here)
ends them if the runner itself dies.

`begin` and `poll` let several launches on disjoint hosts run their windows at once (a class's
seeded quality runs side by side); `start` and `window` wait for one.
"""
from __future__ import annotations

import time

from ..plan.launch_plan import STOP_REQUEST, LaunchPlan, WorkerRequest
from ..result import Outcome
from ..util.checked_folder import FolderRefused
from .outcome import RunResult, folder_refused
from .processes import POLL_S, exit_of, signals_held
from .session import IDLE_SHARE
from .spanning import SPAN_POLL_S, SpanningLaunch

# A rank's idle CPU is judged once its wait covers this long: the first moments after a window
# (OpenMP's threads spin a little before they sleep) are not the wait's rate.
JUDGED_AFTER_S = 2.0
# A closed launch's ranks get this long to exit on the stop request, then are ended.
CLOSE_GRACE_S = 3.0


class SpanningSession:
    """One launch across hosts serving windows (its plan's request asks for a session:
    serve_s > 0)."""

    def __init__(self, plan: LaunchPlan) -> None:
        if plan.script or not plan.launchers or plan.request.serve_s <= 0:
            raise ValueError("a session across hosts serves the built-in worker started by "
                             "launchers, asked with serve_s > 0")
        self.plan, self.windows = plan, 0
        self.launch: SpanningLaunch | None = None
        self.alive = self.ended = False

    def begin(self, request: WorkerRequest | None = None,
              timeout_s: float | None = None) -> RunResult | None:
        """Start the launch (no `request`), or ask its next window; the window's result at
        once when the launch could not even begin (then it has ended), else None: `poll`."""
        if request is None:
            launched_at = time.time()
            try:
                self.launch = SpanningLaunch(self.plan)
            except FolderRefused as exc:   # nothing started, nothing written
                self.ended = True
                return folder_refused(exc, launched_at)
            self.alive = True
            try:
                self.launch.launch()
            except OSError as exc:   # a launcher missing here: a failed trial, not a crash
                self._end()
                out = RunResult(outcome=Outcome.CRASH, launched_at=launched_at,
                                reason=f"a launcher could not be started: {exc}")
                self.launch.close()
                return out
            return None
        if not self.alive or self.launch is None:
            raise RuntimeError("this session has ended")
        self.windows += 1
        self.launch.ask(request, self.plan.timeout_s if timeout_s is None else timeout_s)
        return None

    def poll(self) -> RunResult | None:
        """The window's result once it is over (None: not yet). A window that was not served
        ends the launch on every host first."""
        launch = self.launch
        assert launch is not None
        if not launch.over():
            return None
        if launch.served is not None:
            return launch.result()
        self._end()
        try:
            return launch.result()
        finally:
            launch.close()

    def wait(self) -> RunResult:
        """`poll` until the window is over; an interrupt ends the launch on every host."""
        try:
            while (out := self.poll()) is None:
                time.sleep(SPAN_POLL_S)
            return out
        except BaseException:   # Ctrl-C, SIGTERM: no rank of the launch outlives it
            self.close()
            raise

    def start(self) -> RunResult:
        return self.begin() or self.wait()

    def window(self, request: WorkerRequest, timeout_s: float) -> RunResult:
        return self.begin(request, timeout_s) or self.wait()

    def healthy(self) -> bool:
        """Alive with every launcher still running: a launcher that ended while the launch was
        idle (a host died, its connection dropped, a rank was killed) ends it on every host,
        and the next window of its launch starts a new one."""
        if not self.alive or self.launch is None:
            return False
        if not self.launch.running():
            self._end()
            self.launch.close()
            return False
        return True

    def spins(self, _idle_s: float) -> bool:
        """Whether a rank on any host, idle since the last window, used more than IDLE_SHARE of
        a core meanwhile (oneCCL's progress threads can poll): the hosts' CPU is not seen from
        here, so each rank says what it used (worker/session.py), once its wait is long enough
        to judge."""
        launch = self.launch
        if not self.alive or launch is None or launch.served is None:
            return False
        return any(_idle_share(launch.files.idle(r), launch.n) > IDLE_SHARE
                   for r in range(len(self.plan.ranks)))

    def close(self) -> None:
        """Ask the ranks to stop, end what does not on every host, and clean up after them."""
        launch = self.launch
        if self.alive and launch is not None and launch.running() and launch.served is not None:
            launch.files.write_request(launch.n + 1, STOP_REQUEST)
            deadline = time.monotonic() + CLOSE_GRACE_S
            while time.monotonic() < deadline and any(exit_of(p) is None for p in launch.procs):
                time.sleep(POLL_S)
        self._end()
        if launch is not None:
            launch.close()

    def _end(self) -> None:
        self.alive = False
        if self.ended:
            return
        self.ended = True
        if self.launch is not None:
            with signals_held():
                self.launch.teardown()


def _idle_share(report: dict | None, window: int) -> float:
    """The share of a core a rank's report says it used since window `window` (0.0: no report
    of that wait yet, one too short to judge, or not numbers)."""
    if not report or report.get("after_window") != window:
        return 0.0
    cpu_s, wall_s = report.get("cpu_s"), report.get("wall_s")
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x < 1e9
               for x in (cpu_s, wall_s)) or wall_s < JUDGED_AFTER_S:
        return 0.0
    return cpu_s / wall_s
