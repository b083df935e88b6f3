"""Landscape files written by earlier versions, read in today's knobs (benchmarks/landscapes/table.py's
`Landscape.load` passes every file through `upgraded`)."""
from __future__ import annotations

from typing import Any

from autotune.config import Config, knob_name


def upgraded(data: dict[str, Any]) -> dict[str, Any]:
    return _current_knob_names(_from_per_rank_batches(data))


def _from_per_rank_batches(data: dict[str, Any]) -> dict[str, Any]:
    """Landscapes recorded before the global batch became the invariant name a per-rank
    batch_size (global = batch_size x nproc): rewrite them in today's knobs. Their space's
    batch_size [32, 64] becomes global_batch [32, 64, 128]; the combinations that were never
    recorded (2 ranks at 32, 1 rank at 128) replay as not recorded."""
    space = data.get("space") or {}
    if "batch_size" not in (space.get("knobs") or {}):
        return data
    rows = {}
    for row in (data.get("rows") or {}).values():
        cfg = dict(row["config"])
        cfg["global_batch"] = int(cfg.pop("batch_size") or 32) * int(cfg.get("nproc", 1))
        cfg["batch_size"] = None
        row = {**row, "config": cfg}
        rows[Config.from_dict(cfg).key()] = row
    knobs = dict(space["knobs"])
    batches = sorted({b * n for b in knobs.pop("batch_size") for n in (1, 2)})
    knobs["global_batch"] = batches
    return {**data, "rows": rows, "space": {**space, "knobs": knobs}}


def _current_knob_names(data: dict[str, Any]) -> dict[str, Any]:
    """A space recorded before a knob was renamed (config.KNOB_ALIASES: nproc_per_node) names
    it by its old name; the replay's space resolves nproc from the current one, so the space's
    knobs and each row's grid params take today's names. Row keys need no change: Config.key()
    keeps the old spelling."""
    space = data.get("space") or {}
    if not any(knob_name(k) != k for k in space.get("knobs") or {}):
        return data
    knobs = {knob_name(k): v for k, v in space["knobs"].items()}
    rows = {key: ({**row, "params": {knob_name(k): v for k, v in row["params"].items()}}
                  if row.get("params") else row) for key, row in (data.get("rows") or {}).items()}
    return {**data, "rows": rows, "space": {**space, "knobs": knobs}}
