"""The library's entry points, one per command, with their request and answer values: what the
CLI calls (and a test, or a user's program, may call the same way). Each command is composed in
autotune/commands/; this module only names them.

    search(SearchRequest(budget_s=1800.0)) -> Tuned
"""
from __future__ import annotations

from .commands.search import search
from .commands.search_request import MonotonicClock, SearchRequest, Tuned, check_workload
from .commands.search_study import NO_SEED_NOTE

__all__ = ["NO_SEED_NOTE", "MonotonicClock", "SearchRequest", "Tuned", "check_workload", "search"]
