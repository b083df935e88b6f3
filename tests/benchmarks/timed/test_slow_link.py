"""The ssh ProxyCommand that makes starts dear (benchmarks/timed/slow_link.py): it relays both
ways, after its delay, to a real TCP server, and hosts_window_cost puts it ahead of every host of
the ssh config it was given."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

from benchmarks.timed.hosts_window_cost import slowed
from paths import REPO


def test_bytes_go_both_ways_through_the_relay():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def echo_upper():
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(1024):
                conn.sendall(data.upper())
    threading.Thread(target=echo_upper, daemon=True).start()
    relay = subprocess.run([sys.executable, str(REPO / "benchmarks/timed/slow_link.py"),
                            "127.0.0.1", str(port), "0.1"], input=b"ssh-2.0 hello",
                           capture_output=True, timeout=30)
    server.close()
    assert relay.stdout == b"SSH-2.0 HELLO" and relay.returncode == 0


def test_the_slowed_config_reaches_every_host_through_it(tmp_path):
    given = tmp_path / "ssh_config"
    given.write_text("Host th1\n    HostName 10.0.0.1\n")
    text = Path(slowed(str(given), 7.5, tmp_path)).read_text()
    assert text.startswith("Host *\n    ProxyCommand ") and "slow_link.py %h %p 7.5\n" in text
    assert text.endswith(given.read_text())
