"""An ssh ProxyCommand that waits before it connects: each new ssh connection to a host costs
DELAY seconds more, as a start across the nodes of a real cluster does (ssh's authentication,
torch imported from a shared file system, the process group: 20-60 s, issue 54), while a window
of a launch already running pays nothing. hosts_window_cost --ssh-delay puts it in a copy of the
ssh config it is given.

    ProxyCommand python3 benchmarks/timed/slow_link.py %h %p DELAY
"""
from __future__ import annotations

import os
import socket
import sys
import threading
import time


def _pump(src, dst) -> None:
    """Bytes from one end to the other until either closes."""
    try:
        while chunk := src(65536):
            dst(chunk)
    except OSError:
        pass


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: slow_link.py HOST PORT DELAY_S", file=sys.stderr)
        return 2
    host, port, delay = argv[0], int(argv[1]), float(argv[2])
    time.sleep(delay)
    sock = socket.create_connection((host, port), timeout=30)
    sock.settimeout(None)

    def to_ssh(data: bytes) -> None:
        os.write(1, data)

    def up() -> None:
        _pump(lambda n: os.read(0, n), sock.sendall)
        try:   # ssh's end of file, passed on: the host may still answer
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
    threading.Thread(target=up, daemon=True).start()
    _pump(sock.recv, to_ssh)    # the host closed: ssh's end of file
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
