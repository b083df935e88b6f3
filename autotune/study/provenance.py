"""Was a stored study measured here? The same hardware and the same torch build, or not.

A measurement holds for the machine and the torch it was taken with: another CPU generation
(two EPYCs of family 25 and 26 both call themselves "AMD EPYC"), other ISA flags, other memory or
another torch build all change the timings. So a study is resumed, reported as this machine's or
exported as this machine's command only when both match; any other study is listed with the
reason it is not used. Pure: compares stored study attributes with values the caller probed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import StorageError
from ..probe.topology import Topology, TorchBuild
from . import attrs as A
from .attrs import StudyAttrs


@dataclass(frozen=True, kw_only=True)
class Here:
    """This machine and this torch, as a study stores them."""
    topology: Topology
    torch: TorchBuild


def why_not_here(attrs: Mapping[str, Any] | StudyAttrs, here: Here) -> str | None:
    """None when the study with these user attrs was measured on this hardware with this torch;
    otherwise one line saying what differs (the first difference that matters most)."""
    attrs = StudyAttrs(attrs)
    topo = attrs.topology_json
    if not isinstance(topo, dict):
        return "no machine stored with the study (not written by `autotune search`)"
    try:
        theirs = Topology.from_json(topo)
    except (KeyError, TypeError, ValueError):
        return "the machine stored with the study is unreadable"
    hw = _hardware_difference(theirs, here.topology)
    if hw:
        return f"measured on other hardware: {hw}"
    build = attrs.torch_build_json
    if not isinstance(build, dict):
        old = attrs.library_versions.get("torch", "an unrecorded version")
        return (f"measured with torch {old} before autotune recorded the torch build; this is "
                f"{here.torch.describe()}")
    stored = TorchBuild.from_json(build)
    if stored != here.torch:
        return f"measured with {stored.describe()}; this is {here.torch.describe()}"
    return None


def check_resumable(study: Any, here: Here) -> None:
    """Refuse to add trials to a study (an optuna.Study) measured on other hardware or with
    another torch (its name normally differs; this guards a reused name): never mix them."""
    attrs = StudyAttrs.of(study)
    if not attrs.described:
        return  # a new study
    reason = why_not_here(attrs, here)
    if reason:
        raise StorageError(f"study {study.study_name!r} was {reason}: not resumed; use another "
                           "--storage or --results for this machine")


def _hardware_difference(theirs: Topology, ours: Topology) -> str | None:
    if theirs.fingerprint() == ours.fingerprint():
        return None
    a, b = theirs.hardware(), ours.hardware()
    if a["cpu"] != b["cpu"]:
        if theirs.isa.family is None:
            return (f"{theirs.isa.describe()}, recorded before autotune stored the CPU family; "
                    f"this is {ours.isa.describe()}")
        return f"{theirs.isa.describe()}; this is {ours.isa.describe()}"
    if a["flags"] != b["flags"]:
        only_a = sorted(set(a["flags"]) - set(b["flags"]))
        only_b = sorted(set(b["flags"]) - set(a["flags"]))
        return ("ISA flags differ" + (f"; only there: {' '.join(only_a)}" if only_a else "")
                + (f"; only here: {' '.join(only_b)}" if only_b else ""))
    if a["node_memory_gib"] != b["node_memory_gib"]:
        return (f"memory per NUMA node {a['node_memory_gib']} GiB; here "
                f"{b['node_memory_gib']} GiB")
    if a["gpus"] != b["gpus"]:
        return f"GPUs {a['gpus'] or 'none'}; here {b['gpus'] or 'none'}"
    return (f"CPU layout differs ({len(theirs.cores)} cores, usable CPUs "
            f"{len(theirs.usable_cpus)}; here {len(ours.cores)} cores, usable CPUs "
            f"{len(ours.usable_cpus)})")


def not_used(summaries: list[Any], here: Here, *, workload: str | None = None,
             space: str | None = None, skip: str | None = None) -> list[tuple[str, str]]:
    """(study name, reason) for each autotune study in the storage that was measured elsewhere.
    `summaries` are Optuna StudySummary objects; `workload`/`space` narrow the list to studies of
    the same tuning job (search), `skip` leaves out the study being shown (report)."""
    out = []
    for s in summaries:
        attrs = StudyAttrs.of(s)
        if not s.study_name.startswith("autotune-") or s.study_name == skip:
            continue
        if workload is not None and attrs.workload != workload:
            continue
        if space is not None and attrs.space.get("name", space) != space:
            continue
        reason = why_not_here(attrs, here)
        if reason:
            out.append((s.study_name, reason))
    return out


def not_resumed(storage, here: Here, *, workload: str, space: str) -> list[tuple[str, str]]:
    """(study, why) for the studies of this job in `storage` measured on other hardware or with
    another torch: kept, never resumed, and named so nobody wonders where their trials went."""
    import optuna
    summaries = optuna.get_all_study_summaries(storage, include_best_trial=False)
    return not_used(summaries, here, workload=workload, space=space)


def newer_writer(stored: list[Mapping[str, Any]]) -> str | None:
    """What in a study's attributes (the study's own, then each trial's) says a newer autotune
    wrote it: a schema version above this one's, or a later autotune version (None: nothing).
    Such a study may hold fields this version would misread."""
    from .. import __version__
    from ..probe.topology import SCHEMA_VERSION
    for attrs in stored:
        schema = attrs.get(A.SCHEMA_VERSION)   # the trials' keys are the study's
        if isinstance(schema, int) and not isinstance(schema, bool) and schema > SCHEMA_VERSION:
            return f"schema version {schema} (this autotune reads {SCHEMA_VERSION})"
        version = attrs.get(A.AUTOTUNE_VERSION)
        if isinstance(version, str) and _release(version) > _release(__version__):
            return f"autotune {version} (this is autotune {__version__})"
    return None


def _release(version: str) -> tuple[int, ...]:
    """'0.2.1.dev3' -> (0, 2, 1): the release numbers, up to the first part that is not one."""
    out = []
    for part in version.split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)
