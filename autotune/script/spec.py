"""A user's script as one value: its command, how its runs are scored, and what the scan of its
text found. Built once, from the command line or from a study, and passed whole through the
search request, the trial settings and the study's attributes."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import WorkloadError
from .scan import ScriptScan, scan_command
from .template import check_command

# Knobs the static scan alone decides: no process shows them from outside (KMP_* settings), and
# a script that starts its own workers is launched once.
_SCAN_ONLY = ("kmp_affinity", "kmp_blocktime", "nproc")


@dataclass(frozen=True, kw_only=True)
class ScriptSpec:
    command: tuple[str, ...]             # with {knob} placeholders (script/template.py)
    metric: str | None = None            # --metric: a pattern over rank 0's output
    accuracy: str | None = None          # --accuracy: the pattern of the script's accuracy
    lower_is_better: bool = False        # the --metric number is a time or a loss
    scan: ScriptScan                     # what its script's text does to the knobs

    @classmethod
    def scanned(cls, command: Sequence[str], *, metric: str | None = None,
                accuracy: str | None = None, lower_is_better: bool = False) -> ScriptSpec:
        """The spec of `command`, its script scanned as the file is now (a command without a
        readable .py file scans as empty)."""
        command = tuple(command)
        return cls(command=command, metric=metric, accuracy=accuracy,
                   lower_is_better=lower_is_better, scan=scan_command(command))

    def check(self) -> None:
        """Everything that can be checked before a trial (script/template.check_command)."""
        check_command(self.command, self.metric, self.accuracy, self.lower_is_better)

    @property
    def local_rank_arg(self) -> str | None:
        """--local-rank or --local_rank when the script takes one: each rank gets its own."""
        return self.scan.local_rank_arg

    @property
    def self_launching(self) -> bool:
        """The script starts its own workers: it is launched once."""
        return self.scan.self_launching

    def held(self) -> dict[str, str]:
        """{knob: why} of the knobs the scan alone holds at the default launch's value."""
        return {f.knob: f"{f.where} {f.what}" for f in self.scan.findings
                if f.overrides and f.knob in _SCAN_ONLY}


def script_from_flags(command: Sequence[str] | None, *, metric: str | None = None,
                      accuracy: str | None = None,
                      lower_is_better: bool = False) -> ScriptSpec | None:
    """The spec of a command given with its flags (None without a command, where the flags that
    read a script's output have nothing to read)."""
    if command is None:
        for given, flag in ((metric, "--metric"), (accuracy, "--accuracy"),
                            (lower_is_better, "--lower-is-better")):
            if given:
                raise WorkloadError(f"{flag} reads a script's output: give the command after `--`")
        return None
    return ScriptSpec.scanned(command, metric=metric, accuracy=accuracy,
                              lower_is_better=lower_is_better)
