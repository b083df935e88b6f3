"""Knob names as people and old studies write them: the aliases of renamed knobs, the words for a
name the table lacks, and a text or YAML value turned into the knob's type."""
from __future__ import annotations

import difflib
import re
from typing import Any, Sequence

from ..errors import ConfigError
from .table import BOOL_KNOBS, INT_KNOBS, KNOB_TABLE, KNOBS


# Knobs renamed since, by their old names: studies, manifests, space files and `--set` written
# with those still read. `nproc_per_node` counted ranks per NUMA node, which a torchrun user reads
# as ranks per host (torchrun's --nproc-per-node, and `autotune launch`'s).
KNOB_ALIASES: dict[str, str] = {"nproc_per_node": "ranks_per_numa_node"}
# Config.key() spells a renamed knob by its old name, so keys stored before the rename (studies,
# recorded landscapes) keep naming the same launch.
_KEY_NAMES = {new: old for old, new in KNOB_ALIASES.items()}


def knob_name(name: str) -> str:
    """A knob's current name, from a current or an old one (KNOB_ALIASES)."""
    return KNOB_ALIASES.get(name, name)


def renamed_knobs(text: str) -> str:
    """A rule or expression of a space file with old knob names in their current spelling."""
    for old, new in KNOB_ALIASES.items():
        text = re.sub(rf"\b{old}\b", new, text)
    return text


def unknown_knob(name: str) -> str:
    """The words for a knob name the table lacks, with the closest names when it looks like a
    typo (`nprocs` -> did you mean 'nproc'?): every place that rejects a knob name says this."""
    return f"unknown knob {name!r}{did_you_mean(name)}; valid knobs: {', '.join(KNOBS)}"


def did_you_mean(name: str, names: Sequence[str] = KNOBS) -> str:
    """' (did you mean 'nproc'?)' for a near miss among `names`, else ''."""
    close = difflib.get_close_matches(str(name), names, n=2, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def coerce(knob: str, value: Any, *, where: str = "config") -> Any:
    """Turn a text or YAML value into the knob's type; errors name the knob and the value."""
    if knob not in KNOBS:
        raise ConfigError(f"{where}: {unknown_knob(knob)}")
    if KNOB_TABLE[knob].auto and (value is None or str(value).lower() in ("auto", "default", "none")):
        return None
    if knob in INT_KNOBS:
        if isinstance(value, bool):
            raise ConfigError(f"{where}: {knob}={value!r} must be an integer")
        if isinstance(value, int):
            return value
        try:
            return int(str(value).strip())
        except ValueError:
            raise ConfigError(f"{where}: {knob}={value!r} must be an integer") from None
    if knob in BOOL_KNOBS:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{where}: {knob}={value!r} must be true or false")
    if knob == "ipex" and isinstance(value, bool):  # YAML reads `on`/`off` as booleans
        return "on" if value else "off"
    return str(value).strip()
