"""How `autotune report` writes its values for people: knob changes, numbers, the machine and the
table of configurations (the values are rows.py's and report.py's)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..config import describe_changes
from ..measure.split import split_from

if TYPE_CHECKING:
    from .rows import Row


def _knobs(changes: dict[str, Any]) -> str:
    return describe_changes(changes, none="(the default launch)")


def _machine(topo: dict[str, Any] | None) -> str:
    if not topo:
        return "unknown (no topology stored)"
    isa = topo.get("isa") or {}
    ids = " ".join(f"{k} {isa[k]}" for k in ("family", "model", "stepping")
                   if isa.get(k) is not None)
    model = isa.get("model_name", "unknown CPU") + (f" ({ids})" if ids else "")
    return (f"{model}, {topo.get('usable_physical_cores', '?')} usable physical cores, "
            f"{len(topo.get('numa_nodes', []))} NUMA node(s), {len(topo.get('gpus', []))} GPU(s)")


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _clip(text: str, n: int = 160) -> str:
    one = " ".join(str(text).split())
    return one if len(one) <= n else one[:n - 3] + "..."


def _table(rows: tuple[Row, ...] | list[Row], unit: str = "samples/s") -> list[str]:
    lines = [f"  {'trial':>5}  {unit:>10}  {'x default':>9}  {'accuracy':>8}  "
             f"{'tol':>3}  {'ceiling':>7}  {'step':<24}  knobs that differ from the default launch"]
    for r in rows:
        x = "-" if r.x_default is None else f"{r.x_default:.2f}x"
        acc = "-" if r.accuracy is None else f"{r.accuracy:.4f}"
        tag = f"  [{r.role.split(':')[1]}]" if r.role.startswith("reference:") else ""
        if r.busy and r.outside_share is not None:
            tag += f"  [busy: {r.outside_share:.0%} of its cores taken by other processes]"
        elif r.busy:
            tag += f"  [busy: cpu_share {r.cpu_share:.2f}]"
        split = split_from(r.split)
        step = split.brief() if split else "-"
        ceiling = "-" if r.of_ceiling is None else f"{min(r.of_ceiling, 1.0):.0%}"
        lines.append(f"  {r.number:>5}  {r.throughput:>10.1f}  {x:>9}  {acc:>8}  "
                     f"{r.tolerance:>3}  {ceiling:>7}  {step:<24}  "
                     f"{_knobs(r.changes)}{tag}")
    return lines
