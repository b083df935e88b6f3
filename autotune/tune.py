"""The library's entry points, one per command, with their request and answer values: what the
CLI calls (a test, or a user's program, calls them the same way). Each command is composed in
autotune/commands/; this module only names them, with the vocabulary their requests take (the
defaults the CLI's --help shows, the budget and storage-URL helpers).

    search(SearchRequest(budget_s=1800.0)) -> Tuned
    run(RunRequest(config=Config(nproc=2))) -> RunAnswer
"""
from __future__ import annotations

from .commands.common import StudyRef, Workload
from .commands.compare import CompareRequest, Compared, compare
from .commands.export import ExportRequest, export
from .commands.hosts import Hosts, not_task_zero
from .commands.launch import LaunchRequest, Launched, launch
from .commands.probe import ProbeRequest, Probed, probe
from .commands.report import (Dashboard, DashboardRequest, ReportRequest, Reported,
                              open_dashboard, report)
from .commands.run import RunAnswer, RunRequest, run
from .commands.search import search
from .commands.search_request import MonotonicClock, SearchRequest, Tuned, check_workload
from .commands.search_study import NO_SEED_NOTE
from .commands.verify import Verified, VerifyRequest, verify
from .export.command import FORMATS
from .plan.hosts import LAUNCHERS
from .plan.launch_plan import STANDALONE_SECONDS, TARGET_SECONDS
from .recommend.rounds import MAX_ASKED_ROUNDS, MAX_ROUNDS_FACTOR
from .recommend.weigh import DEFAULT_RUN_LENGTH, parse_run_length
from .run.idle import IDLE_DEADLINE_S
from .run.trials_dir import DEFAULT_KEEP as DEFAULT_KEEP_TRIALS
from .script.spec import ScriptSpec, script_from_flags
from .search.budget import parse_budget
from .search.options import GUIDES
from .study.storage import holds_password, redact
from .util.search_path import relative_entry

__all__ = [
    "CompareRequest", "Compared", "Dashboard", "DashboardRequest", "ExportRequest", "Hosts",
    "LaunchRequest", "Launched", "MonotonicClock", "NO_SEED_NOTE", "ProbeRequest", "Probed",
    "ReportRequest", "Reported", "RunAnswer", "RunRequest", "ScriptSpec", "SearchRequest",
    "StudyRef", "Tuned", "Verified", "VerifyRequest", "Workload",
    "check_workload", "compare", "export", "launch", "not_task_zero", "open_dashboard", "probe",
    "report", "run", "search", "verify",
    "DEFAULT_KEEP_TRIALS", "DEFAULT_RUN_LENGTH", "FORMATS", "GUIDES", "IDLE_DEADLINE_S", "LAUNCHERS",
    "MAX_ASKED_ROUNDS", "MAX_ROUNDS_FACTOR", "STANDALONE_SECONDS", "TARGET_SECONDS", "holds_password", "parse_budget", "redact",
    "parse_run_length", "relative_entry", "script_from_flags",
]
