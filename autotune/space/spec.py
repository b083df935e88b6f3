"""Reading a search-space file: YAML in, a checked `SpaceSpec` out, no machine needed.

Every error names the file, the key and the problem in one line, so `--space` typos fail before
the first trial. Resolution against a Topology lives in space/resolve.py; the format in
search_spaces/README.md.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import expr as _expr
from ..config import (BOOL_KNOBS, INT_KNOBS, KNOBS, Config, coerce, knob_name, renamed_knobs,
                      unknown_knob)
from ..errors import ConfigError, SpaceError

TOPOLOGY_INTS = ("usable_cores", "cores_per_node", "numa_nodes", "logical_cpus", "smt", "gpus",
                 "ccl_worker_max")
# Capability lists, each holding values of one knob.
TOPOLOGY_LISTS = {"found_allocators": "allocator", "found_backends": "backend",
                  "found_omp_runtimes": "omp_runtime", "supported_precisions": "precision",
                  "found_bindings": "binding", "found_ipex": "ipex",
                  "ccl_affinities": "ccl_worker_affinity", "ccl_yields": "ccl_yield",
                  "found_mem_policies": "mem_policy"}
# Used when a file has no `constraints:` key; `constraints: []` means none at all.
DEFAULT_CONSTRAINTS = ("threads * nproc <= usable_cores",)
_TOP_KEYS = ("name", "description", "knobs", "fixed", "constraints")
_KNOB_KEYS = ("choices", "exclude", "addresses")
# What a knob may say it speeds up (measure/split.Bottleneck's values; the guide reads them).
PARTS = ("data", "compute", "communication")
_VALUE_KINDS = {**{n: _expr.INT for n in TOPOLOGY_INTS}, **{n: _expr.STRS for n in TOPOLOGY_LISTS}}
_RULE_KINDS = {**{n: _expr.INT for n in TOPOLOGY_INTS}, "global_batch_size": _expr.INT,
               **{k: _expr.INT if k in INT_KNOBS else _expr.BOOL if k in BOOL_KNOBS else _expr.STR
                  for k in KNOBS}}


@dataclass(frozen=True, kw_only=True)
class Item:
    """One entry of a choices list: a coerced literal, or an expression resolved later."""
    where: str
    text: str
    value: Any = None
    expr: ast.expr | None = None


@dataclass(frozen=True, kw_only=True)
class KnobSpec:
    where: str
    choices: tuple[Item, ...]
    exclude: tuple[Item, ...] = ()
    addresses: tuple[str, ...] | None = None   # None: the knob table's (config.Knob.addresses)


@dataclass(frozen=True, kw_only=True)
class Rule:
    text: str
    node: ast.expr
    names: frozenset[str]


@dataclass(frozen=True, kw_only=True)
class SpaceSpec:
    """A loaded and checked space file, not yet tied to a machine."""
    name: str
    source: str
    description: str
    knobs: dict[str, KnobSpec]
    fixed: dict[str, Any]
    constraints: tuple[Rule, ...]


class _Loader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys (plain YAML silently keeps the last one)."""


def _no_duplicates(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, (str, int, float, bool)):
            continue  # unhashable keys are reported by construct_mapping itself
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}",
                                                    key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def load_space(path: str | Path) -> SpaceSpec:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpaceError(f"{path}: search-space file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpaceError(f"{path}: cannot read search-space file ({exc.__class__.__name__}: "
                         f"{getattr(exc, 'strerror', None) or exc})") from None
    return parse_space(text, source=str(path))


def parse_space(text: str, *, source: str = "<space>") -> SpaceSpec:
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise SpaceError(f"{source}: {at}invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise SpaceError(f"{source}: invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SpaceError(f"{source}: top level must be a mapping with a 'knobs' key, got {_what(data)}")
    for key in data:
        if key not in _TOP_KEYS:
            raise SpaceError(f"{source}: unknown key {key!r}; valid keys: {', '.join(_TOP_KEYS)}")
    name, description = data.get("name", Path(source).stem), data.get("description", "")
    for key, value in (("name", name), ("description", description)):
        if not isinstance(value, str):
            raise SpaceError(f"{source}: {key}: must be text, got {_what(value)}")
    knobs = data.get("knobs")
    if not isinstance(knobs, dict) or not knobs:
        raise SpaceError(f"{source}: knobs: must be a non-empty mapping of knob -> choices, "
                         f"got {_what(knobs)}")
    fixed = data.get("fixed") or {}
    if not isinstance(fixed, dict):
        raise SpaceError(f"{source}: fixed: must be a mapping of knob -> value, got {_what(fixed)}")
    # a space file written with a knob's old name (config.KNOB_ALIASES) still reads
    knobs = {knob_name(k) if isinstance(k, str) else k: v for k, v in knobs.items()}
    fixed = {knob_name(k) if isinstance(k, str) else k: v for k, v in fixed.items()}
    specs = {_knob_name(k, f"{source}: knobs.{k}"): _knob(k, v, f"{source}: knobs.{k}")
             for k, v in knobs.items()}
    fixed_values = {}
    for knob, value in fixed.items():
        where = f"{source}: fixed.{knob}"
        _knob_name(knob, where)
        if knob in specs:
            raise SpaceError(f"{where}: also listed under knobs; a knob is either searched or fixed")
        if isinstance(value, (dict, list)):
            raise SpaceError(f"{where}: must be a single value, got {_what(value)}")
        fixed_values[knob] = check_value(knob, value, where)
    rules = _rules(data.get("constraints", list(DEFAULT_CONSTRAINTS)), source)
    return SpaceSpec(name=name, source=source, description=description, knobs=specs,
                     fixed=fixed_values, constraints=rules)


def _what(value: Any) -> str:
    if value is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", str: f"text {value!r}", bool: f"{value!r}",
            int: f"the integer {value}", float: f"the number {value}"}.get(type(value), type(value).__name__)


def _knob_name(knob: Any, where: str) -> str:
    if knob not in KNOBS:
        raise SpaceError(f"{where}: {unknown_knob(knob)}")
    return knob


def _knob(knob: str, entry: Any, where: str) -> KnobSpec:
    if not isinstance(entry, dict):  # shorthand: `threads: [1, 2]`
        return KnobSpec(where=where, choices=_items(knob, entry, where))
    for key in entry:
        if key not in _KNOB_KEYS:
            raise SpaceError(f"{where}: unknown key {key!r}; valid keys: {', '.join(_KNOB_KEYS)}")
    if "choices" not in entry:
        raise SpaceError(f"{where}: missing 'choices'")
    return KnobSpec(where=where, choices=_items(knob, entry["choices"], f"{where}.choices"),
                    exclude=_items(knob, entry.get("exclude") or [], f"{where}.exclude", True),
                    addresses=_addresses(entry.get("addresses"), f"{where}.addresses"))


def _addresses(raw: Any, where: str) -> tuple[str, ...] | None:
    """`addresses: [data]`: the parts of a step the knob speeds up, which the guide moves first
    when the measured bottleneck is one of them."""
    if raw is None:
        return None
    names = [raw] if isinstance(raw, str) else raw
    if not isinstance(names, list) or not names or any(n not in PARTS for n in names):
        raise SpaceError(f"{where}: {_what(raw)}: give one or more of {', '.join(PARTS)}")
    return tuple(names)


def _items(knob: str, raw: Any, where: str, empty_ok: bool = False) -> tuple[Item, ...]:
    if isinstance(raw, str):  # a lone expression: `choices: divisors(usable_cores)`
        return (_item(knob, raw, where),)
    if not isinstance(raw, list):
        raise SpaceError(f"{where}: expected a list of values, got {_what(raw)}")
    if not raw and not empty_ok:
        raise SpaceError(f"{where}: empty list")
    return tuple(_item(knob, v, f"{where}[{i}]") for i, v in enumerate(raw))


def _item(knob: str, value: Any, where: str) -> Item:
    if isinstance(value, (dict, list)):
        raise SpaceError(f"{where}: expected a value or an expression, got {_what(value)}")
    if not (isinstance(value, str) and _is_expression(knob, value)):
        return Item(where=where, text=str(value), value=check_value(knob, value, where))
    try:
        node = _expr.parse(value)
        kind = _expr.check(node, _VALUE_KINDS, text=value.strip())
    except _expr.ExprError as exc:
        raise SpaceError(f"{where}: {exc}") from None
    if knob in INT_KNOBS and kind not in (_expr.INT, _expr.INTS):
        raise SpaceError(f"{where}: {value!r} gives {_expr.describe(kind)}, but {knob} takes integers")
    if knob not in INT_KNOBS and not (isinstance(node, ast.Name) and TOPOLOGY_LISTS.get(node.id) == knob):
        lists = [n for n, k in TOPOLOGY_LISTS.items() if k == knob]
        raise SpaceError(f"{where}: {value!r} does not give {knob} values; use names"
                         + (f" or {lists[0]}" if lists else ""))
    return Item(where=where, text=value.strip(), expr=node)


def _is_expression(knob: str, text: str) -> bool:
    """`jemalloc` is a value, `found_allocators` and `divisors(4)` are expressions."""
    if knob not in INT_KNOBS and knob not in TOPOLOGY_LISTS.values():
        return False  # bools, kmp_affinity ("granularity=fine,compact,1,0") are literal
    stripped = text.strip()
    if stripped.lstrip("-").isdigit() or stripped.lower() in ("auto", "default", "none"):
        return False
    try:
        node = ast.parse(stripped, mode="eval").body
    except SyntaxError:
        return knob in INT_KNOBS  # so the error says "not a valid expression"
    if isinstance(node, ast.Name):
        return node.id in _VALUE_KINDS  # other bare words: literal, checked as a value
    return not isinstance(node, ast.Constant)


def check_value(knob: str, value: Any, where: str) -> Any:
    try:
        v = coerce(knob, value, where=where)  # its message already names `where`
    except ConfigError as exc:
        raise SpaceError(str(exc)) from None
    try:  # one-knob Config: reuses its checks (ranges, valid names) and their messages
        Config(**({"nproc": v} if knob == "ranks_per_numa_node" and isinstance(v, int) and v > 0 else {}),
               **{knob: v})
    except ConfigError as exc:
        raise SpaceError(f"{where}: {exc}") from None
    return v


def _rules(raw: Any, source: str) -> tuple[Rule, ...]:
    if not isinstance(raw, list):
        raise SpaceError(f"{source}: constraints: expected a list of rules, got {_what(raw)}")
    rules = []
    for i, text in enumerate(raw):
        where = f"{source}: constraints[{i}]"
        if not isinstance(text, str) or not text.strip():
            raise SpaceError(f"{where}: expected a rule such as {DEFAULT_CONSTRAINTS[0]!r}, "
                             f"got {_what(text)}")
        text = renamed_knobs(text)
        try:
            node = _expr.parse(text)
            kind = _expr.check(node, _RULE_KINDS, text=text.strip(), compare=True)
        except _expr.ExprError as exc:
            raise SpaceError(f"{where}: {exc}") from None
        if kind != _expr.BOOL:
            raise SpaceError(f"{where}: {text!r} is not a comparison; write e.g. "
                             f"{DEFAULT_CONSTRAINTS[0]!r}")
        rules.append(Rule(text=text.strip(), node=node, names=frozenset(_expr.names_in(node))))
    return tuple(rules)
