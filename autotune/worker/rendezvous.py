"""How a trial's ranks meet, and the proof, before anything else, that every one of them is this
launch's (issue 61).

torch's `env://` rendezvous takes whoever registers first as a rank: its TCP store listens on
every interface, and a co-user who reads the port in /proc/net/tcp (or, across hosts, in `ps`)
can join as a rank whose start is late. So a rank of a trial (one that holds the launch's token,
util/channel.py) meets its peers through:
- on one machine (the plan says RENDEZVOUS_FILE): a file store in the 0700 trial folder, reached
  through the folder's descriptor: nothing listens for the rendezvous at all;
- across hosts: rank 0's store on a socket bound to MASTER_ADDR only (the address the ranks
  use), not every interface;
and then, before any other collective, every rank all-gathers an HMAC of the launch's token and
its own rank number, and checks every peer's. A launch with a stranger in it ends there, in one
line, with nothing measured. A rank started by hand (an exported command: no token) meets as
`env://` always did; docs/security.md says what each covers.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import socket
from datetime import timedelta

import torch
import torch.distributed as dist

from ..plan.launch_plan import RENDEZVOUS_ENV, RENDEZVOUS_FILE
from ..util.channel import Channel

PROOF_BYTES = 32        # HMAC-SHA256
_PREFIX = "default_pg"  # the keys' prefix torch's own rendezvous gives the default group


def store_name(token: str) -> str:
    """The file store's name in the trial folder: the launch's own (a name left by an earlier
    launch in the folder is never this one's)."""
    return "rendezvous." + hmac.new(token.encode(), b"store", hashlib.sha256).hexdigest()[:16]


def trial_store(channel: Channel | None, backend: str, rank: int, world_size: int,
                timeout: timedelta) -> dist.Store | None:
    """The store a trial's ranks meet through; None: `env://` (a rank started by hand), or
    none at all (mpi: mpirun has wired the ranks)."""
    if channel is None or not channel.token or backend == "mpi":
        return None
    if os.environ.get(RENDEZVOUS_ENV) == RENDEZVOUS_FILE:
        # /proc/self/fd/N/NAME resolves through the checked folder's descriptor, never its path
        name = store_name(channel.token)
        # made here first, private whatever the umask (torch's store creates it 0666 & ~umask);
        # every rank does so before the store opens it, so the file's first creator is this
        os.close(os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=channel.folder.fd))
        path = f"/proc/self/fd/{channel.folder.fd}/{name}"
        return dist.PrefixStore(_PREFIX, dist.FileStore(path, world_size))
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    if rank != 0:
        return dist.PrefixStore(_PREFIX, dist.TCPStore(host, port, world_size, False, timeout))
    listener = _listen(host, port)
    store = dist.TCPStore(host, port, world_size, True, timeout, multi_tenant=True,
                          master_listen_fd=listener.fileno())
    listener.detach()          # the store owns the descriptor now
    return dist.PrefixStore(_PREFIX, store)


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on `host`'s own address only (torch's store listens on all of them)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((socket.gethostbyname(host) if family == socket.AF_INET else host, port))
        sock.listen(socket.SOMAXCONN)
    except OSError:
        sock.close()
        raise
    return sock


def proof(token: str, rank: int, world_size: int) -> bytes:
    return hmac.new(token.encode(), f"rank {rank} world {world_size}".encode(),
                    hashlib.sha256).digest()


def strangers(token: str, world_size: int, proofs: list[bytes]) -> list[int]:
    """The ranks whose proof is not the launch's (pure)."""
    return [r for r, got in enumerate(proofs)
            if not hmac.compare_digest(got, proof(token, r, world_size))]


def ranks_text(ranks: list[int]) -> str:
    """'rank 1', 'ranks 1, 3', 'ranks 1-7' (pure)."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return "ranks " + ", ".join(str(r) for r in ranks)


def prove(token: str, rank: int, world_size: int, device: torch.device) -> str | None:
    """Every rank's proof, all-gathered as bytes: why this launch is not the user's (one line),
    or None when every peer holds its token."""
    mine = torch.tensor(list(proof(token, rank, world_size)), dtype=torch.uint8, device=device)
    everyone = [torch.empty(PROOF_BYTES, dtype=torch.uint8, device=device)
                for _ in range(world_size)]
    try:
        dist.all_gather(everyone, mine)
    except Exception as exc:  # noqa: BLE001 - a peer that sends something else is no proof
        # a stranger that sends something else breaks the exchange itself (the peer resets the
        # connection, or the sizes differ): no peer of this rank has proved anything
        peers = [r for r in range(world_size) if r != rank]
        said = str(exc).splitlines()[0][:200] if str(exc) else ""
        return (f"{ranks_text(peers)} proved nothing: the ranks' proofs of the launch's secret "
                f"could not be exchanged ({type(exc).__name__}: {said}); refused, nothing measured")
    bad = strangers(token, world_size, [bytes(t.cpu().tolist()) for t in everyone])
    if not bad:
        return None
    return (f"a stranger joined this launch: {ranks_text(bad)} does not hold the launch's secret "
            "(refused, nothing measured)")
