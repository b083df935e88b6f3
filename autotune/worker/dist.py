"""Process-group facts a rank needs before and around training: is the backend usable here,
and what did every rank find wrong (so each result names the real cause)."""
from __future__ import annotations

import json

import torch
import torch.distributed as dist

# A rank's problems (what it found not in force, its workload's error) in one all-gather: a few
# lines of text; a longer list is shortened to fit.
PROBLEM_BYTES = 4096


def backend_problem(backend: str) -> str | None:
    if backend == "gloo":
        return None if dist.is_gloo_available() else "this torch build has no gloo"
    if backend == "mpi":
        return None if dist.is_mpi_available() else "this torch build has no MPI support"
    if backend == "nccl":
        # DDP here trains CPU tensors; nccl only moves CUDA tensors.
        ok = dist.is_nccl_available() and torch.cuda.is_available()
        return None if ok else "nccl needs CUDA devices, none available"
    if backend == "ccl":
        # Registering is what makes init_process_group("ccl") work: Intel's bindings where they
        # are installed, else autotune's own build (autotune/comm/ccl).
        from ..comm import ccl
        try:
            ccl.register()
            return None
        except Exception as exc:  # noqa: BLE001 - a broken build is as unavailable as a missing one
            return str(exc)
    return f"unknown backend {backend!r}"


def gather_problems(problems: list[str], world_size: int) -> str | None:
    """Every rank's problems, so each rank's result names the real cause, not "another rank".
    They travel as JSON in a fixed-size byte tensor, never a pickle: a peer's bytes are data."""
    device = (torch.device("cuda", torch.cuda.current_device())
              if dist.get_backend() == "nccl" else torch.device("cpu"))
    mine = torch.tensor(list(encode_problems(problems)), dtype=torch.uint8, device=device)
    gathered = [torch.empty(PROBLEM_BYTES, dtype=torch.uint8, device=device)
                for _ in range(world_size)]
    dist.all_gather(gathered, mine)
    everyone = [decode_problems(bytes(t.cpu().tolist())) for t in gathered]
    if all(ps == everyone[0] for ps in everyone):   # one rank, or every rank saw the same
        return "; ".join(everyone[0]) or None
    text = "; ".join(f"rank {r}: {p}" for r, ps in enumerate(everyone) for p in ps)
    return text or None


def encode_problems(problems: list[str]) -> bytes:
    """`problems` as PROBLEM_BYTES bytes: a 4-byte length, then JSON (shortened to fit), then
    zeros."""
    room = PROBLEM_BYTES - 4
    kept = [str(p) for p in problems]
    data = json.dumps(kept).encode()
    while len(data) > room:      # the longest problem loses its tail first, then the last one
        longest = max(range(len(kept)), key=lambda i: len(kept[i]))
        cut = len(kept[longest]) - (len(data) - room) // 6 - 4   # 6: the longest escape
        if cut > 0:
            kept[longest] = kept[longest][:cut] + "..."
        else:
            kept = kept[:-1]
        data = json.dumps(kept).encode()
    return len(data).to_bytes(4, "big") + data + bytes(room - len(data))


def decode_problems(data: bytes) -> list[str]:
    """What encode_problems wrote; what is not that is said as such, never acted on."""
    n = int.from_bytes(data[:4], "big")
    try:
        got = json.loads(data[4:4 + n].decode()) if n <= len(data) - 4 else None
    except ValueError:
        got = None
    if not isinstance(got, list) or not all(isinstance(p, str) for p in got):
        return ["sent problems that cannot be read"]
    return got
