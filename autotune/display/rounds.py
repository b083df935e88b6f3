"""One line per verification window on stderr, for `compare` and `verify` (which have no bar)."""
from __future__ import annotations

import sys
from typing import TextIO

from ..progress import Silent


class RoundLines(Silent):
    """`autotune: round 2/4: A` (with `of_rounds`), or `autotune: round 2: reference:default`."""

    def __init__(self, *, of_rounds: bool = True, quiet: bool = False,
                 stream: TextIO | None = None) -> None:
        self.of_rounds, self.quiet, self.stream = of_rounds, quiet, stream

    def verify_start(self, *, role: str, round: int, rounds: int, **_: object) -> None:
        if self.quiet:
            return
        shown = f"{round}/{rounds}" if self.of_rounds else f"{round}"
        print(f"autotune: round {shown}: {role}", file=self.stream or sys.stderr, flush=True)
