"""The recommendation as the study keeps it: its launch command rendered once, when the search
ends, and stored beside it (and as the dashboard's note), so `export`, `launch` and `report` read
the same command later, on any machine."""
from __future__ import annotations

from typing import Any

from ..config import Config
from ..probe.topology import Topology
from ..quality.verdict import recommendation_claims
from ..recommend.compile_words import compile_lines
from ..recommend.settle import Verdict
from ..study.attrs import StudyAttrs, write_recommendation
from .command import launch_command, render
from .launch import inconclusive


def script_launch(attrs: StudyAttrs | dict) -> dict:
    """launch_command's script-mode arguments from a study's attributes: launched as its trials
    were, and without the knobs the script overrides (seen from outside or in its text)."""
    attrs = StudyAttrs(attrs)
    scan = attrs.script_scan
    # A line that sets the knob for certain (an assignment before torch loads, a call) means the
    # exported value would not act either, even when no trial happened to show a difference.
    written = {f["knob"]: f"{f['where']} {f['what']}" for f in scan.get("findings", ())
               if f.get("overrides")}
    return {"script": True, "local_rank_arg": scan.get("local_rank_arg"),
            "overridden": {**written, **attrs.script_overrides}}


def figure_fields(rec: dict[str, Any], config: Config) -> dict[str, Any]:
    """What an export's manifest says of a stored recommendation's figure: its headline (the
    header's line), the verdict and, for a lower bound, the bound beside the median speedup. A
    recommendation stored before verdicts existed reads as it did then."""
    verdict = Verdict.stored(rec)
    bound = (rec.get("settling") or {}).get("lower_bound")
    return {"headline": rec.get("headline"), "speedup": rec.get("speedup"),
            "spread": rec.get("spread"), "verified": rec.get("verified"),
            "verdict": verdict.value,
            "lower_bound": bound if verdict is Verdict.LOWER_BOUND else None,
            "inconclusive": inconclusive(rec, config), "vs_run_cpu": rec.get("vs_run_cpu"),
            "vs_default_compiled": rec.get("vs_default_compiled"),
            "accuracy": recommendation_claims(rec), "compile": compile_lines(rec)}


def save_recommendation(study, rec, topology: Topology, workload: str,
                        command: tuple[str, ...] | None = None, cluster=None) -> str | None:
    """Store the recommendation and its launch command on the study (and as a dashboard note)."""
    if rec is None:
        return None
    from ..study.storage import library_versions
    manifest = {"fingerprint": topology.fingerprint(), "machine": topology.isa.describe(),
                "library_versions": library_versions(), "workload": workload,
                **figure_fields(rec.to_json(), rec.config)}
    program, script = None, {}
    if command:
        from ..script.template import fill
        program = fill(command, rec.config)
        script = script_launch(StudyAttrs.of(study))
    python = cluster.python if cluster is not None else None
    command = render(launch_command(rec.config, topology, workload=workload, program=program,
                                    manifest=manifest, cluster=cluster, **script,
                                    **({"python": python} if python else {})), "shell")
    write_recommendation(study, {**rec.to_json(), "command": command})
    try:
        from ..dashboard import save_study_note
        save_study_note(study, rec, command)
    except ImportError:
        pass
    return command
