"""Never below a reference it measured (issue 62): a 150-second search on a public DDP script
measured run_cpu's settings in verification and recommended a pick that ran 0.93x of them. A
reference (every verified candidate whose role is a reference's, study/records.Role: run_cpu's
settings, and whatever other reference the search measures) that verifies faster than the pick,
in the rounds both were measured, is the recommendation, when it holds up against the default
launch and its quality is accepted; else the summary says in one line why it is not."""
from __future__ import annotations

from typing import Callable, Protocol, Sequence

from ..config import Config
from ..measure.stats import ratio_stats
from ..quality.verdict import QualityVerdict
from ..study.records import Role


class _Verified(Protocol):
    config: Config
    role: str
    throughputs: tuple[float, ...]

    @property
    def holds(self) -> bool: ...


def reference_name(role: str) -> str:
    """"run_cpu's settings", "the default compiled reference": a reference as the summary names
    it."""
    return "run_cpu's settings" if role == Role.RUN_CPU else \
        f"the {role.split(':', 1)[-1].replace('_', ' ')} reference"


def left_out(references: Sequence[tuple[str, float]], *, kept: int,
             speedup: float) -> list[str]:
    """The lines that name each reference verification left out for time (`references`: its
    role and its speed over the default launch in the search, one run) that the search measured
    at least as fast as the recommendation's `speedup`: a 4-minute search of a script whose
    launch takes 20 s verified only its leader, a sampled trial 0.5% ahead of run_cpu's settings
    in one run each; the leader settled at 1.00x, and the summary recommended the default launch
    without a word of run_cpu's settings (1.07x in the search, 1.04-1.09x verified in the same
    command's other searches)."""
    held = f"{kept} candidate{'s' if kept != 1 else ''}"
    return [f"{reference_name(role)} measured {x:.2f}x the default launch in the search (one "
            f"run) and {'were' if role == Role.RUN_CPU else 'was'} not verified: the time left "
            f"held the rounds of {held}; `autotune verify` measures the search's best "
            "candidates again" for role, x in references if x >= speedup]


def is_reference(role: str) -> bool:
    """A reference measured beside the search (not the default launch, the baseline itself)."""
    return role.startswith("reference:") and role != Role.DEFAULT


def over(win: _Verified, other: _Verified) -> float | None:
    """The pick's median ratio over `other` in the rounds both were measured (past the asked
    rounds only the pick goes on); None without a common round."""
    n = min(len(win.throughputs), len(other.throughputs))
    if not n:
        return None
    return ratio_stats(list(win.throughputs[:n]), list(other.throughputs[:n])).median


def reference_check(win: _Verified, verified: Sequence[_Verified],
                    accept: Callable[[Config], QualityVerdict] | None,
                    name: Callable[[str], str],
                    finish: Callable[[_Verified], float] | None = None
                    ) -> tuple[_Verified, list[str]]:
    """(what to recommend, the lines that say why a faster reference is not it). The fastest
    reference that `win` runs below 1.00x of, when it holds up and is accepted, replaces it.
    `finish`: the time a launch takes to finish the user's run (recommend/weigh.py): a reference
    faster at the steady rate whose compile makes it finish later is not faster."""
    faster = sorted(((r, ratio) for r in verified if r is not win and is_reference(r.role)
                     and (ratio := over(win, r)) is not None and ratio < 1.0
                     and (finish is None or finish(r) < finish(win))),
                    key=lambda pair: pair[1])
    lines = []
    for ref, ratio in faster:
        rounds = min(len(win.throughputs), len(ref.throughputs))
        said = f"{name(ref.role)} ran {1 / ratio:.2f}x the pick over {rounds} round(s)"
        if not ref.holds:
            lines.append(f"{said}, but did not hold up against the default launch (its median "
                         "round, or 3 of 4 rounds): not recommended")
            continue
        verdict = accept(ref.config) if accept is not None else None
        if verdict is not None and not verdict.accepted:
            lines.append(f"{said}, but its accuracy was not accepted ({verdict.why})")
            continue
        return ref, lines
    return win, lines
