"""One line per verification window on stderr, for `compare` and `verify` (which have no bar)."""
from __future__ import annotations

import sys
from typing import TextIO

from ..config import Config, describe_changes
from ..progress import Silent


class RoundLines(Silent):
    """`autotune: round 2/4: A` (with `of_rounds`), or, for verify (`named`), `autotune: round 2:
    reference:default (default launch)` and a line per seeded quality confirmation run."""

    def __init__(self, *, of_rounds: bool = True, quiet: bool = False, named: bool = False,
                 stream: TextIO | None = None) -> None:
        self.of_rounds, self.quiet, self.named, self.stream = of_rounds, quiet, named, stream

    def verify_start(self, *, role: str, round: int, rounds: int, config: Config,
                     **_: object) -> None:
        if self.quiet:
            return
        shown = f"{round}/{rounds}" if self.of_rounds else f"{round}"
        what = f" ({describe_changes(config)})" if self.named else ""
        self._say(f"autotune: round {shown}: {role}{what}")

    def confirm_start(self, *, config: Config, seed: int) -> None:
        if self.quiet or not self.named:
            return
        self._say(f"autotune: seeded quality confirmation, seed {seed}: "
                  f"{describe_changes(config)}")

    def _say(self, line: str) -> None:
        print(line, file=self.stream or sys.stderr, flush=True)
