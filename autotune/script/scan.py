"""A static look at a user's training script before the first trial (pure: text in, findings out).

Textbook DDP scripts set their own threads and affinity (`os.environ["OMP_NUM_THREADS"] = "8"`
before `import torch`, `torch.set_num_threads`, `os.sched_setaffinity`) or start their own workers
(`mp.spawn`). Each of these silently defeats a knob autotune sets from outside, so the lines are
named (file:line) with what to change, once, before the search spends any time. What really ran
is then checked from outside on every trial (measure/observe.py); this scan only warns and plans.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace

# A script's first MiB: far more than any training script, and bounded for one that is not.
SCAN_BYTES = 1 << 20
# (pattern, knob it defeats, what the line does, what to change). An assignment overrides what
# autotune puts in the environment; a setdefault does not (autotune's value is already there).
_ENV_VARS = {"OMP_NUM_THREADS": "threads", "MKL_NUM_THREADS": "threads",
             "KMP_AFFINITY": "kmp_affinity", "KMP_BLOCKTIME": "kmp_blocktime",
             "LD_PRELOAD": "allocator"}
_ENV_SET = re.compile(r"""(?:os\.environ\s*\[\s*['"](?P<a>[A-Z_]+)['"]\s*\]\s*=(?!=)"""
                      r"""|os\.putenv\s*\(\s*['"](?P<b>[A-Z_]+)['"]"""
                      r"""|os\.environ\.update\s*\(.*?\b(?P<c>[A-Z_]+)\b\s*[=:])""")
_CALLS = (
    (re.compile(r"\btorch\.set_num_threads\s*\("), "threads", "calls torch.set_num_threads",
     "remove it (or set it from os.environ['OMP_NUM_THREADS']) so the tuned thread count acts"),
    (re.compile(r"\bos\.sched_setaffinity\s*\("), "binding", "sets its own CPU affinity",
     "remove it so autotune's binding (taskset/numactl) acts"),
)
_SPAWN = re.compile(r"\b(?:mp|multiprocessing|torch\.multiprocessing)\.(?:spawn|start_processes|"
                    r"Process)\s*\(|\bspawn\s*\(\s*\w+\s*,\s*(?:args|nprocs)\s*=")
_WORKER_ARG = re.compile(r"""add_argument\s*\(\s*['"](--(?:nproc|nprocs|nproc[-_]per[-_]node|"""
                         r"""world[-_]size|num[-_]procs|num[-_]workers[-_]per[-_]node))['"]""")
_LOCAL_RANK_ARG = re.compile(r"""add_argument\s*\(\s*['"](--local[-_]rank)['"]""")
# torch.compile(model), @torch.compile, model.compile(): code that compiles itself (issue 59)
_COMPILES = re.compile(r"\btorch\.compile\b\s*[(@]?|\.compile\s*\(\s*\)")


@dataclass(frozen=True, kw_only=True)
class Finding:
    path: str
    line: int
    knob: str          # the Config knob this line defeats; "nproc" for self-launching scripts
    what: str          # what the line does
    fix: str           # what to change
    overrides: bool    # True: the knob cannot act while the line stays (not a setdefault)

    def __post_init__(self) -> None:
        if self.line < 1:
            raise ValueError(f"Finding.line={self.line!r}: lines count from 1")

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def message(self) -> str:
        return f"{self.where} {self.what}: {self.fix}"


@dataclass(frozen=True, kw_only=True)
class ScriptScan:
    path: str | None                          # the script read (None: none found in the command)
    findings: tuple[Finding, ...] = ()
    local_rank_arg: str | None = None         # "--local-rank" or "--local_rank" when it takes one
    cut: bool = False                         # longer than SCAN_BYTES: the rest was not read

    @property
    def self_launching(self) -> bool:
        return any(f.knob == "nproc" for f in self.findings)

    @property
    def overridden(self) -> tuple[str, ...]:
        """Knobs the script overrides for certain (each once): the search need not vary them."""
        return tuple(dict.fromkeys(f.knob for f in self.findings if f.overrides))

    def warning(self) -> str:
        """One warning naming every line, or "" when nothing was found."""
        if not self.findings:
            return ""
        lines = [f"warning: {self.path} overrides what autotune tunes from outside:"]
        lines += [f"  {f.message()}" for f in self.findings]
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"path": self.path, "local_rank_arg": self.local_rank_arg,
                "findings": [{"where": f.where, "knob": f.knob, "what": f.what, "fix": f.fix,
                              "overrides": f.overrides} for f in self.findings]}


def script_path(command: tuple[str, ...]) -> str | None:
    """The .py file a command runs (`python train.py ...`, `python -u train.py`), if any."""
    for arg in command[1:]:
        if arg.endswith(".py") and not arg.startswith("-"):
            return arg
    if command and command[0].endswith(".py"):
        return command[0]
    return None


def scan_text(text: str, path: str) -> ScriptScan:
    """Findings in a script's source text. Comments and docstrings are skipped; other strings
    may match (a warning too many costs a line, one too few costs a search)."""
    found: list[Finding] = []
    local_rank = None
    in_doc = False
    for n, raw in enumerate(text.splitlines(), start=1):
        quotes = raw.count('"""') + raw.count("'''")
        if in_doc or (quotes and raw.lstrip()[:3] in ('"""', "'''")):
            in_doc = in_doc != (quotes % 2 == 1)   # a docstring's text names calls, runs none
            continue
        line = raw.split("#", 1)[0]
        if not line.strip():
            continue
        for m in _ENV_SET.finditer(line):
            var = m.group("a") or m.group("b") or m.group("c")
            if var == "LD_PRELOAD":   # read only when a process starts: its children's
                found.append(Finding(path=path, line=n, knob="allocator", what="sets LD_PRELOAD",
                                     fix="it acts only in processes the script starts; remove it "
                                         "so autotune's allocator and OpenMP runtime act there",
                                     overrides=False))
            elif var in _ENV_VARS:
                knob = _ENV_VARS[var]
                found.append(Finding(path=path, line=n, knob=knob, what=f"sets {var}",
                                     fix=f"remove it (or use os.environ.setdefault) so autotune's "
                                         f"{knob} setting acts", overrides=True))
        if "setdefault" in line:
            for var in _ENV_VARS:
                if re.search(rf"""setdefault\s*\(\s*['"]{var}['"]""", line):
                    found.append(Finding(path=path, line=n, knob=_ENV_VARS[var],
                                         what=f"sets a default {var}",
                                         fix="fine: autotune's value takes precedence",
                                         overrides=False))
        for pattern, knob, what, fix in _CALLS:
            if pattern.search(line):
                found.append(Finding(path=path, line=n, knob=knob, what=what, fix=fix,
                                     overrides=True))
        if _SPAWN.search(line):
            found.append(Finding(path=path, line=n, knob="nproc", what="starts its own workers",
                                 fix="autotune launches it once (nproc=1) and tunes threads, "
                                     "allocator and OpenMP for its workers; pass the worker count "
                                     "through your own argument", overrides=True))
        if (m := _WORKER_ARG.search(line)):
            found.append(Finding(path=path, line=n, knob="nproc",
                                 what=f"takes its own worker count ({m.group(1)})",
                                 fix="autotune launches it once; set the count in the command",
                                 overrides=True))
        if (m := _LOCAL_RANK_ARG.search(line)):
            local_rank = m.group(1)
        if _COMPILES.search(line):   # its ranks get the private compile cache all the same
            found.append(Finding(path=path, line=n, knob="compile", what="compiles itself",
                                 fix="fine: autotune offers its compile knob only through a "
                                     "{compile} placeholder, never twice", overrides=False))
    return ScriptScan(path=path, findings=tuple(found), local_rank_arg=local_rank)


def scan_command(command: tuple[str, ...]) -> ScriptScan:
    """Scan the script a command runs; a command without a readable .py file scans as empty. Only
    its first SCAN_BYTES are read: the command may come from a study someone else wrote, and
    `launch --dry-run` read a stored 400 MB "script" whole (905 MB, 64 s)."""
    path = script_path(command)
    if path is None or not os.path.isfile(path):
        return ScriptScan(path=path)
    try:
        with open(path, "rb") as f:
            head = f.read(SCAN_BYTES + 1)
    except OSError:
        return ScriptScan(path=path)
    scan = scan_text(head[:SCAN_BYTES].decode("utf-8", errors="replace"), path)
    return replace(scan, cut=len(head) > SCAN_BYTES)


def entry_point_compiles(workload: str) -> str | None:
    """'mymodel.py:12' where a `module:function` workload's module compiles its model itself
    (the built-in trainer would compile it a second time), else None; a module not found on
    the path, or a built-in workload, says nothing. Only the module's own file is read."""
    module = workload.split(":", 1)[0] if ":" in workload else None
    if not module:
        return None
    try:
        import importlib.util
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    scan = scan_command(("python", spec.origin))
    hit = next((f for f in scan.findings if f.knob == "compile"), None)
    return hit.where if hit else None
