"""The kernel's weighted-interleave weights, set before a mem_policy=weighted launch: one of the
two kernel settings autotune writes (the other is numa_balancing, run/numa_quiet.py).

Which weights is the planner's answer (plan/memory.wanted_weights: each DRAM and CXL node's read
bandwidth over the slowest's). Written all or nothing: a node file that refuses the write puts
back every weight already written, and the error says so in one line. The weights stay set
afterwards: they act only on tasks that ask for weighted interleave, and the launch the user
pastes (`autotune launch`, an export) interleaves by them.
"""
from __future__ import annotations

import os

from ..errors import MachineStateError
from ..plan.memory import WEIGHTS_DIR, wanted_weights
from ..probe.topology import Topology


def apply_weights(topology: Topology, *, weights_dir: str = WEIGHTS_DIR
                  ) -> list[tuple[int, int, int]]:
    """Make the weights what the plan wants: [(node, old, new)] for each one written, [] when
    they already are (or the kernel sets them itself, in its auto mode)."""
    wanted = wanted_weights(topology)
    wi = topology.memory.weighted_interleave
    if not wanted or (wi is not None and wi.auto):
        return []
    current = {n: _read(weights_dir, n) for n in wanted}
    changes = [(n, current[n], w) for n, w in sorted(wanted.items()) if current[n] != w]
    written: list[tuple[int, int]] = []
    for node, old, new in changes:
        try:
            _write(weights_dir, node, new)
        except OSError as exc:
            for done, before in reversed(written):
                try:
                    _write(weights_dir, done, before)
                except OSError:
                    pass   # reported below as not put back
            raise MachineStateError(
                f"mem_policy=weighted: cannot write {os.path.join(weights_dir, f'node{node}')} "
                f"({exc.strerror or exc}); nothing changed (weights "
                + " ".join(f"{n}:{current[n]}" for n in sorted(current)) + ")") from None
        written.append((node, old))
    return changes


def _read(weights_dir: str, node: int) -> int:
    path = os.path.join(weights_dir, f"node{node}")
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read(64).strip())   # a weight is 1-3 digits; never read a device dry
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not a weight"
        raise MachineStateError(f"mem_policy=weighted: cannot read {path} ({why}); nothing "
                                "changed") from None


def _write(weights_dir: str, node: int, weight: int) -> None:
    with open(os.path.join(weights_dir, f"node{node}"), "w", encoding="ascii") as f:
        f.write(f"{weight}\n")


def describe(changes: list[tuple[int, int, int]]) -> str:
    """'weighted interleave weights set: node0 1 -> 6, node1 1 -> 6 (they stay set)'."""
    return ("weighted interleave weights set: "
            + ", ".join(f"node{n} {old} -> {new}" for n, old, new in changes)
            + " (they stay set; they act only on weighted-interleave tasks)")


def weights_problem(topology: Topology) -> str | None:
    """apply_weights for a trial: None when the weights are in place, else why not (the trial
    is then recorded as infeasible, with nothing changed)."""
    try:
        apply_weights(topology)
    except MachineStateError as exc:
        return str(exc)
    return None
