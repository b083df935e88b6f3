"""The terminal display of a long command: the search's progress lines on stderr and, at a
terminal, a live bar under them. It implements autotune.progress.Progress; the library calls it,
the CLI creates it and prints its summary."""
from .progress import TerminalProgress
from .rounds import RoundLines

__all__ = ["RoundLines", "TerminalProgress"]
