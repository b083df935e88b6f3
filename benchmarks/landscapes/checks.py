"""Which machine a landscape file comes from, and whether it holds what a comparison needs
(issue 45). The refit (two_machines.py) and the search replay (benchmarks/replay/recorded.py) read
landscapes only through `load_checked`, so a file from another machine or one with classes
missing is refused in one line that names what is wrong, before anything is fitted or written.

A landscape is named on the command line as FINGERPRINT=FILE, or as FILE alone when its name
says the fingerprint (landscape-<fingerprint>.json, as benchmarks/landscapes/table.py names them). Its
machine is the one its capture describes (many_cores.py embeds `autotune probe --capture`'s
files, and the fingerprint is computed again from them), else the one it records.
"""
from __future__ import annotations

import re
import tempfile
from pathlib import Path

from autotune.config import Config
from autotune.result import Outcome

from .table import Landscape, math_key

LAYOUTS = ("1 rank per node", "several ranks per node")


class LandscapeRefused(ValueError):
    """The file cannot be used as told; the message is the one line the user reads."""


def told(spec: str) -> tuple[str, Path]:
    """(fingerprint, path) from FINGERPRINT=FILE, or FILE named landscape-<fingerprint>.json."""
    fp, sep, rest = spec.partition("=")
    if sep and re.fullmatch(r"[0-9a-f]{12}", fp):
        return fp, Path(rest)
    m = re.fullmatch(r"landscape-([0-9a-f]{12})\.json", Path(spec).name)
    if not m:
        raise LandscapeRefused(f"{spec}: say which machine it is from: FINGERPRINT={spec} (12 hex "
                               "digits, `autotune probe` prints the machine's)")
    return m.group(1), Path(spec)


def capture_fingerprint(land: Landscape) -> str:
    """The fingerprint of the machine the file's capture describes (its recorded one if it holds
    no capture: landscapes recorded before issue 45)."""
    files = land.data.get("capture")
    if not files:
        return str(land.data.get("fingerprint"))
    from autotune.probe import probe
    with tempfile.TemporaryDirectory(prefix="autotune-landscape-capture-") as tmp:
        for rel, text in files.items():
            path = Path(tmp) / rel
            if Path(tmp).resolve() not in path.resolve().parents:
                raise LandscapeRefused(f"its capture names a file outside it: {rel}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return probe(tmp, collect_capabilities=False).fingerprint()


def layout_class(config: Config, nodes: int) -> str:
    per_node = config.ranks_per_numa_node or max(1, config.nproc // max(1, nodes))
    return LAYOUTS[0] if per_node == 1 else LAYOUTS[1]


def nodes_of(land: Landscape) -> int:
    return max(1, len(land.topology().compute_nodes()))


def missing_classes(land: Landscape) -> list[str]:
    """What a comparison needs and the file lacks: the default launch measured, the default
    math's accuracy, both layout classes measured, and the accuracy of every math class it
    measured (the best configuration is only known within the accuracy gate)."""
    missing = []
    default = land.rows.get(Config().key())
    if not default or default.get("outcome") != Outcome.OK:
        missing.append("the default launch (no ok row)")
    if land.default_accuracy() is None:
        missing.append(f"the accuracy of the default math {math_key(Config())}")
    nodes = nodes_of(land)
    ok = [Config.from_dict(r["config"]) for r in land.rows.values()
          if r.get("outcome") == Outcome.OK and r.get("throughput")]
    for layout in LAYOUTS:
        if not any(layout_class(c, nodes) == layout for c in ok):
            missing.append(f"layout '{layout}' (no ok row)")
    for key in sorted({math_key(c) for c in ok}):
        if land.accuracy_of(Config.from_dict({"global_batch": int(key.split(':')[0]),
                                              "precision": key.split(':')[1]})) is None:
            missing.append(f"the accuracy of math class {key}")
    return missing


def load_checked(spec: str) -> tuple[Landscape, str]:
    """The landscape and its machine's fingerprint, or LandscapeRefused (one line)."""
    fp, path = told(spec)
    try:
        land = Landscape.load(path)
    except (OSError, ValueError) as exc:
        raise LandscapeRefused(f"{path}: not a landscape file ({exc})") from None
    if not isinstance(land.data.get("rows"), dict) or "topology" not in land.data:
        raise LandscapeRefused(f"{path}: not a landscape file (no rows or topology)")
    found = capture_fingerprint(land)
    if found != fp:
        raise LandscapeRefused(f"{path}: from machine {found} (its capture's fingerprint), not "
                               f"{fp} as told; name the file of that machine, or tell {found}")
    if land.data.get("fingerprint") != found:
        raise LandscapeRefused(f"{path}: records machine {land.data.get('fingerprint')} but its "
                               f"capture is of {found}: the file mixes two machines")
    missing = missing_classes(land)
    if missing:
        raise LandscapeRefused(f"{path}: missing {'; '.join(missing)}; record them "
                               "(python -m benchmarks.landscapes.many_cores --record) or name another file")
    return land, fp
