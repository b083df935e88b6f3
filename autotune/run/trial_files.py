"""A launch's trial folder as the runner holds it: opened and checked once before its ranks
start (util/checked_folder.py), kept until the launch ends, and the only way to its files. The
requests go out and the results come back through a channel with the launch's token
(util/channel.py); the logs are created and read through the same descriptor.

The rank's side is worker/main.py: it reaches the folder by its path, checks it the same way and
must find the very folder the runner checked (its device and inode, in the environment).
"""
from __future__ import annotations

import os
from typing import Any

from ..result import Outcome
from ..plan.launch_plan import (LaunchPlan, idle_report_path, window_request_path,
                                window_result_path)
from ..util.channel import (FOLDER_ENV, TOKEN_ENV, TOKEN_FILE, Channel, new_token,
                            write_token_file)
from ..util.checked_folder import CheckedFolder, open_private
from ..util.process_identity import RUNNER_ENV, mark
from .rank_output import LOG_TAIL_LINES, TAIL_BYTES, clean_tail

# How much of a script's log the runner reads for its metric lines (a chatty script: the end)
SCRIPT_LOG_BYTES = 4 << 20


class TrialFiles:
    """The folder of `plan`'s launch, its channel and the names of each rank's files in it."""

    def __init__(self, plan: LaunchPlan, folder: CheckedFolder, token: str) -> None:
        self.plan, self.folder = plan, folder
        self.channel = Channel(folder, token)
        self.names = [(folder.name_of(rp.log_path), folder.name_of(rp.result_path))
                      for rp in plan.ranks]
        self.ranks_ignored = 0           # requests the ranks said they ignored
        self._counted: set[tuple[int, int]] = set()

    @classmethod
    def open(cls, plan: LaunchPlan) -> "TrialFiles":
        """The trial folder made (0700) and checked (FolderRefused: someone else could change
        it or rename a folder above it), with the launch's token; across hosts the token is in
        a 0600 file of the folder, which the ranks there read (util/channel.py)."""
        folder = open_private(plan.workdir or os.path.dirname(plan.request_path), create=True)
        try:
            files = cls(plan, folder, new_token())
            if plan.launchers:
                write_token_file(folder, files.channel.token)
            return files
        except BaseException:
            folder.close()
            raise

    def drop_token_file(self) -> None:
        """Once every rank has answered (each read the token first), or the launch ended: the
        token's file goes, and with it the only copy of the secret outside the processes."""
        if self.plan.launchers and self.folder.fd >= 0:
            self.folder.unlink(TOKEN_FILE)

    def env(self) -> dict[str, str]:
        """What each rank's environment adds to the plan's: the runner that started it, the
        launch's token and the folder the ranks must find."""
        return {RUNNER_ENV: mark(), TOKEN_ENV: self.channel.token,
                FOLDER_ENV: self.folder.identity}

    @property
    def ignored(self) -> int:
        """Files in the folder that were not this launch's: results the runner ignored and
        requests its ranks ignored."""
        return self.channel.ignored + self.ranks_ignored

    def write_request(self, n: int, request: dict[str, Any]) -> None:
        """Window `n`'s request (0: the launch's own, written before the ranks start)."""
        self.channel.send(self.folder.name_of(window_request_path(self.plan.request_path, n)),
                          request)

    def clear_results(self, n: int) -> None:
        """No result of window `n` left from before (a stale one would read as success)."""
        for _log, result in self.names:
            self.folder.unlink(window_result_path(result, n))

    def result(self, rank: int, n: int = 0) -> dict[str, Any] | None:
        """Rank `rank`'s result of window `n`, when it is there and this launch's."""
        found = self.channel.receive(window_result_path(self.names[rank][1], n))
        if found is not None:
            extra = found.pop("ignored_files", 0)
            if isinstance(extra, int) and 0 < extra < 1 << 20 and \
                    (rank, n) not in self._counted:
                self._counted.add((rank, n))
                self.ranks_ignored += extra
        return found

    def idle(self, rank: int) -> dict[str, Any] | None:
        """What rank `rank` last said of the CPU it used while waiting for its next window
        (worker/session.py), when it is this launch's."""
        return self.channel.receive(idle_report_path(self.names[rank][1]))

    def result_of(self, rank: int, code: int | None, n: int = 0) -> dict[str, Any] | str | None:
        """As `result`, for a rank that exited: a str says why the file at its result's name
        was not taken (classify calls it malformed). A user's script writes none, so there
        exit 0 itself is the success (its metric is read afterwards, from its report or its
        output)."""
        result = self.result(rank, n)
        if result is None and self.plan.script and code == 0:
            return {"status": Outcome.OK, "script": True}
        if result is None:
            return self.channel.why.get(window_result_path(self.names[rank][1], n))
        return result

    def open_log(self, rank: int) -> int:
        """Rank `rank`'s new log, open for appending (created here: nothing may be there)."""
        return self.folder.create(self.names[rank][0])

    def open_file(self, path: str) -> int:
        """A new file of the launch's folder (a launcher's log), open for writing."""
        return self.folder.create(self.folder.name_of(path))

    def log_size(self, rank: int) -> int:
        return self.folder.size(self.names[rank][0])

    def log_bytes(self, rank: int, nbytes: int) -> bytes:
        return self.folder.tail(self.names[rank][0], nbytes)

    def tail(self, rank: int, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of rank `rank`'s log, made printable and bounded."""
        return clean_tail(self.log_bytes(rank, TAIL_BYTES), lines)

    def file_tail(self, path: str, lines: int) -> str:
        """The last lines of another file of the launch's folder (a launcher's log)."""
        return clean_tail(self.folder.tail(self.folder.name_of(path), TAIL_BYTES), lines)

    def report(self, path: str) -> dict[str, Any] | None:
        """A script's report (autotune.report_metrics), when it is this launch's."""
        return self.channel.receive(self.folder.name_of(path))

    def close(self) -> None:
        self.folder.close()

