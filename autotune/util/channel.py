"""Messages between a launch's runner and its ranks: JSON objects in a checked folder
(checked_folder.py), each carrying the launch's secret token.

The runner draws a random token for every launch it starts and puts it in the ranks' environment
(`/proc/PID/environ` is readable by the process's owner only, unlike its command line); every
request the runner writes and every result a rank writes carries it. A file without it, or one
that is not a plain file of this user's, not JSON or too large, was not written by this launch:
it is ignored and counted (once per file), never acted on. A launch started without a token
(by hand) expects files without one.

Across hosts the runner cannot set a rank's environment but through the launcher's command line,
which every user of a host can read (ssh's remote command, mpirun's `-x`, srun's `env`): there
the token goes into the trial folder itself, in a file of its own (TOKEN_FILE, 0600, in the
0700 folder each rank checks on its own host), and the rank's environment names only that file.
Whoever can read it can read the launch's requests and results too: the folder's check is what
guards both. The runner removes the file once every rank has answered (they read it first).

Ground floor, standard library only (the ranks use it).
"""
from __future__ import annotations

import hmac
import json
import secrets
from typing import Any

from .checked_folder import CheckedFolder, NotOurs

TOKEN_ENV = "AUTOTUNE_LAUNCH_TOKEN"     # the launch's token, in each rank's environment
FOLDER_ENV = "AUTOTUNE_TRIAL_FOLDER"    # device:inode of the trial folder the runner checked
TOKEN_KEY = "token"
# Across hosts: the name of the file in the trial folder that holds the launch's token (above),
# and the variable that tells a rank to read it (its value: that name).
TOKEN_FILE = "launch.token"
TOKEN_FILE_ENV = "AUTOTUNE_LAUNCH_TOKEN_FILE"
# Set in a rank's environment by a launch across hosts (plan/cluster.py): the rank's stdin is the
# runner's end of the launch, held open by the runner through the launcher (ssh's channel, srun's
# and mpirun's forwarding of stdin); its end means the runner or its connection is gone, and the
# rank ends (worker/lifeline.py). The ranks kept alive between windows would otherwise wait on.
LIFELINE_ENV = "AUTOTUNE_LIFELINE"
# A rank's result holds its step times (at most max_steps of them) and what was in force: well
# under a MiB. Anything past this is not a result.
MAX_MESSAGE_BYTES = 16 << 20
_KEPT_REASONS = 8


def new_token() -> str:
    return secrets.token_hex(16)


def write_token_file(folder: CheckedFolder, token: str) -> None:
    """The launch's token in a new 0600 file of the folder (a file already there is refused:
    FileExistsError)."""
    fd = folder.create(TOKEN_FILE)
    with open(fd, "w", closefd=True) as f:
        f.write(token)


def read_token_file(folder: CheckedFolder, name: str) -> str:
    """The token in the file `name` of the folder; NotOurs when it is missing, not a plain 0600
    file of this user's, or not a token."""
    found = folder.read(name, 256, private=True)
    if found is None:
        raise NotOurs(f"{name}: no such file", (0, 0, 0, 0))
    token = found.data.decode("ascii", "replace").strip()
    if len(token) < 16 or not token.isalnum():
        raise NotOurs(f"{name}: not a launch token", found.ident)
    return token


class Channel:
    """`send` and `receive` JSON objects by name in `folder`, with `token`; `ignored` counts the
    files received that were not this launch's, `reasons` says why (the first few)."""

    def __init__(self, folder: CheckedFolder, token: str) -> None:
        self.folder, self.token = folder, token
        self.ignored = 0
        self.reasons: list[str] = []
        self.why: dict[str, str] = {}     # name -> why the last file ignored there was
        self._seen: set[tuple[str, tuple[int, ...]]] = set()
        self._last: dict[str, tuple[tuple[int, ...], dict[str, Any]]] = {}

    def send(self, name: str, message: dict[str, Any]) -> None:
        data = json.dumps({**message, TOKEN_KEY: self.token}, indent=1)
        self.folder.replace(name, data.encode())

    def receive(self, name: str) -> dict[str, Any] | None:
        """The message at `name`, without its token; None when there is none, or what is there
        is not this launch's (then it is counted once, however often it is read again)."""
        try:
            found = self.folder.read(name, MAX_MESSAGE_BYTES)
        except NotOurs as exc:
            return self._ignore(name, exc.ident, exc.why)
        if found is None:
            return None
        last = self._last.get(name)
        if last is not None and last[0] == found.ident:
            return dict(last[1])
        try:
            data = json.loads(found.data)
        except ValueError as exc:
            return self._ignore(name, found.ident, f"{name}: not JSON ({exc})")
        if not isinstance(data, dict):
            return self._ignore(name, found.ident, f"{name}: not a JSON object")
        token = data.pop(TOKEN_KEY, "")
        if not isinstance(token, str) or not hmac.compare_digest(token, self.token):
            return self._ignore(name, found.ident, f"{name}: not written by this launch (no "
                                                   "token of its own)")
        self._last[name] = (found.ident, data)
        return dict(data)

    def _ignore(self, name: str, ident: tuple[int, ...], why: str) -> None:
        self.why[name] = why
        if (name, ident) not in self._seen:
            self._seen.add((name, ident))
            self.ignored += 1
            if len(self.reasons) < _KEPT_REASONS:
                self.reasons.append(why)
        return None

    def take_ignored(self) -> int:
        """Files ignored since the last call."""
        taken, self.ignored = self.ignored, 0
        return taken
