"""What a long command tells whoever watches it, one method per event: the search's trials and
quality runs, verification's rounds, notes and warnings. The library calls these methods and
never prints; the terminal display is autotune/display/'s, and `Silent` hears nothing.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .config import Config

if TYPE_CHECKING:
    from .probe.topology import Topology
    from .space.resolve import ResolvedSpace
    from .study.records import Record


class Progress(Protocol):
    def start(self, *, name: str, storage: str, space: ResolvedSpace, stale: int,
              topology: Topology) -> None:
        """A search opened its study (`stale`: trials a killed search left running)."""

    def note(self, text: str) -> None:
        """Something worth a line; --quiet hides it."""

    def warn(self, text: str) -> None:
        """Something that changes what the results mean: shown even with --quiet."""

    def trial_start(self, *, config: Config, role: str, number: int) -> None: ...

    def trial_end(self, *, record: Record, seconds: float) -> None: ...

    def knob_held(self, *, knob: str, why: str) -> None:
        """The search stops varying a knob (the user's script sets it itself)."""

    def quality_start(self, *, config: Config, math_class: str, seed: int,
                      side_by_side: int = 0) -> None: ...

    def confirm_start(self, *, config: Config, seed: int) -> None: ...

    def verify_start(self, *, config: Config, role: str, round: int, rounds: int,
                     max_rounds: int) -> None:
        """Round `round` of verification measures `config`; past `rounds` the figure was
        unsettled, and it may go on to `max_rounds`."""


class Silent:
    """The Progress of a command nobody watches; subclass it to hear some events only."""

    def start(self, *, name: str, storage: str, space: ResolvedSpace, stale: int,
              topology: Topology) -> None: ...

    def note(self, text: str) -> None: ...

    def warn(self, text: str) -> None: ...

    def trial_start(self, *, config: Config, role: str, number: int) -> None: ...

    def trial_end(self, *, record: Record, seconds: float) -> None: ...

    def knob_held(self, *, knob: str, why: str) -> None: ...

    def quality_start(self, *, config: Config, math_class: str, seed: int,
                      side_by_side: int = 0) -> None: ...

    def confirm_start(self, *, config: Config, seed: int) -> None: ...

    def verify_start(self, *, config: Config, role: str, round: int, rounds: int,
                     max_rounds: int) -> None: ...


SILENT: Progress = Silent()
