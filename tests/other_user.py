"""A real second local user for the tests of what another user can do to ours (issue 34): made
with useradd for one test and removed after it. The tests run as root (they must, to add a
user); the attacker's steps run as that user in real processes."""
from __future__ import annotations

import os
import pwd
import subprocess
import uuid
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class OtherUser:
    name: str
    uid: int
    gid: int

    def run(self, *argv: str, **kw) -> subprocess.CompletedProcess:
        """`argv` as this user, checked."""
        return subprocess.run(argv, user=self.uid, group=self.gid, extra_groups=[], check=True,
                              capture_output=True, text=True, **kw)


@pytest.fixture
def other_user():
    if os.geteuid() != 0:
        pytest.skip("needs root to add a second user (useradd)")
    name = f"at34{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=True, capture_output=True)
    try:
        pw = pwd.getpwnam(name)
        yield OtherUser(name=name, uid=pw.pw_uid, gid=pw.pw_gid)
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)
