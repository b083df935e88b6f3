"""study/attrs.py is the one owner of the study's user attributes: a grep for a key finds it, and
no other module reads or writes a study attribute by spelling its key."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import optuna
import pytest

import autotune
from autotune.script.scan import ScriptScan
from autotune.script.spec import ScriptSpec
from autotune.study import attrs as A

SOURCE = Path(autotune.__file__).parent
OWNER = SOURCE / "study" / "attrs.py"

# Keys that are also field names of other formats, spelled by the modules that own those:
# the trial record (records.py), the export manifest (export/), the report's and the search
# summary's JSON, the topology's JSON, and probe.torch_build (a function). A literal grep cannot
# tell those apart, so for them the lookup check below is the test.
ALSO_ANOTHER_FORMATS_FIELD = {A.SCHEMA_VERSION, A.AUTOTUNE_VERSION, A.FINGERPRINT, A.WORKLOAD,
                              A.LIBRARY_VERSIONS, A.RECOMMENDATION, A.NOISE_FLOOR, A.TORCH_BUILD}


def _modules() -> list[Path]:
    return sorted(SOURCE.rglob("*.py"))


def _spelled_in(key: str) -> list[str]:
    # a prefix starts a key: followed by the rest of it ({math_class}, a name) or the quote;
    # "accuracy: 0.91" in a printed line is prose
    end = r"""(?=[{\w"'])""" if key in A.PREFIXES else r"""["']"""
    quoted = re.compile(r"""["']""" + re.escape(key) + end)
    return [str(p.relative_to(SOURCE)) for p in _modules() if quoted.search(p.read_text())]


@pytest.mark.parametrize("key", sorted(set(A.KEYS + A.PREFIXES) - ALSO_ANOTHER_FORMATS_FIELD))
def test_one_grep_for_a_study_attribute_key_finds_one_module(key):
    assert _spelled_in(key) == ["study/attrs.py"]


def test_every_key_is_spelled_in_attrs():
    for key in A.KEYS + A.PREFIXES:
        assert "study/attrs.py" in _spelled_in(key), key


def _names_study_key(node: ast.AST) -> str | None:
    """The study key (or key prefix) an expression spells out, if it does."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _names_study_key(node.left)
    if isinstance(node, ast.JoinedStr) and node.values:
        return _names_study_key(node.values[0])
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        if node.value in A.KEYS:
            return node.value
        return next((p for p in A.PREFIXES if node.value.startswith(p)), None)
    return None


def _attrs_like(node: ast.AST) -> bool:
    """A user-attribute dict: `study.user_attrs`, or a variable or parameter holding one."""
    return ast.unparse(node).split(".")[-1].endswith("attrs")


def _study_attr_lookups(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, key) of every study attribute read or written by a literal key."""
    found = []
    for node in ast.walk(tree):
        key_node = None
        if isinstance(node, ast.Subscript) and _attrs_like(node.value):
            key_node = node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            method, receiver = node.func.attr, node.func.value
            if method == "set_user_attr" or (method in ("get", "pop", "setdefault")
                                             and _attrs_like(receiver)):
                key_node = node.args[0]
            elif method == "startswith" and node.args:
                key_node = node.args[0]
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn))
                                                   for op in node.ops) \
                and any(_attrs_like(c) for c in node.comparators):
            key_node = node.left
        key = _names_study_key(key_node) if key_node is not None else None
        if key is not None:
            found.append((node.lineno, key))
    return found


def test_no_other_module_reads_or_writes_a_study_attribute_by_its_key():
    spelled = {str(p.relative_to(SOURCE)): lookups for p in _modules() if p != OWNER
               for lookups in [_study_attr_lookups(ast.parse(p.read_text()))] if lookups}
    assert spelled == {}


def test_the_lookup_check_catches_a_spelled_key():
    """The check above would see the ways a key used to be spelled outside attrs.py."""
    code = ('study.set_user_attr("cluster", c)\nattrs.get("script_command")\n'
            'study.user_attrs["recommendation"]\n"topology" in s.user_attrs\n'
            'study.set_user_attr(f"accuracy:{k}", v)\nk.startswith("quality:")\n'
            'manifest.get("fingerprint")\nsummary["recommendation"] = 1\n')
    assert [k for _, k in _study_attr_lookups(ast.parse(code))] == [
        A.CLUSTER, A.SCRIPT_COMMAND, A.RECOMMENDATION, A.TOPOLOGY, A.ACCURACY_PREFIX,
        A.QUALITY_PREFIX]


def test_written_facts_read_back_under_their_stored_names():
    """The writers store the names earlier studies have (so old studies and optuna-dashboard
    still read them), and StudyAttrs reads them back typed."""
    study = optuna.create_study(directions=["maximize", "maximize"])
    A.write_script(study, ScriptSpec(command=("python", "t.py", "--lr={lr}"), metric="m",
                                     lower_is_better=True,
                                     scan=ScriptScan(path="t.py", local_rank_arg="--local-rank")))
    A.write_script_overrides(study, {"threads": "sets OMP_NUM_THREADS"})
    A.write_recommendation(study, {"headline": "1.2x", "command": "x"})
    A.write_cluster(study, {"hosts": ["a", "b"]})
    floor = {"mean": 0.9, "sd": 0.01, "n": 2, "values": [0.89, 0.91], "math_class": "32:fp32"}
    A.write_noise_floor(study, floor)
    A.write_quality_evidence(study, "32:fp32", "{}")
    A.write_accuracy(study, "32:fp32@seed0", 0.5)
    A.write_worker(study, "h:1:ab", {"state": "searching"})
    A.write_verifier(study, {"id": "h:1:ab"})
    stored = study.user_attrs
    assert stored["script_command"] == ["python", "t.py", "--lr={lr}"]
    assert stored["script_lower_is_better"] is True
    assert stored["script_overrides"] == {"threads": "sets OMP_NUM_THREADS"}
    assert stored["recommendation"]["headline"] == "1.2x"
    assert stored["quality:32:fp32"] == "{}" and stored["accuracy:32:fp32@seed0"] == 0.5
    assert stored["autotune:worker:h:1:ab"] == {"state": "searching"}
    assert stored["autotune:verifier"] == {"id": "h:1:ab"}
    a = A.StudyAttrs.of(study)
    assert a.script_command == ["python", "t.py", "--lr={lr}"] and a.script_metric == "m"
    assert a.script_lower_is_better and a.script_scan == {
        "path": "t.py", "local_rank_arg": "--local-rank", "findings": []}
    assert stored["script_accuracy"] is None and stored["script_warning"] == ""
    assert a.cluster_json == {"hosts": ["a", "b"]} and a.noise_floor == floor
    assert a.quality_evidence == ["{}"]
    assert a.has_accuracy("32:fp32@seed0") and not a.has_accuracy("32:fp32@seed1")
    assert a.workers == {"h:1:ab": {"state": "searching"}}
    assert not a.described and a.recommendation["command"] == "x"
    empty = A.StudyAttrs({})
    assert (empty.script_command, empty.recommendation, empty.cluster_json) == (None, None, None)
    assert (empty.script_overrides, empty.settings, empty.script_lower_is_better) == ({}, {}, False)
