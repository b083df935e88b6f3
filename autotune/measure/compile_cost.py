"""What torch.compile cost a run, apart from the steady rate it bought (pure: the arithmetic on
what the rank's watch counted, worker/compiled.py; result.TrialResult's compile_s,
compile_cache and recompiles).

A compiled rank reports, per warm-up step, how many frames dynamo compiled in it, inductor's
FX-graph cache hits and misses over the window, whether this window built its compiled model
(a new launch, or a window whose configuration changed) or kept the last one, and the frames
compiled inside the timed window. From that:

- **compile_s**: the warm-up steps that compiled, each less the steady step (the median step of
  the timed window that follows), summed. So it is the compiled steps' excess over the compiled
  model's own steady rate, not over eager's first steps: it also holds the first step's lazy
  set-up that an eager launch pays too (tens of milliseconds against seconds of compiling), an
  upper bound by that much. A window that kept its compiled model compiled nothing: 0.
- **compile_cache**: "cold" when inductor compiled any graph afresh (a cache miss), "warm" when
  every graph came from the cache, or nothing was compiled (a kept model).
- **recompiles**: frames compiled after the model's first compiling step (a changed shape, a
  guard that failed), inside the timed window included (there it also slowed the window; the
  warm-up steps on while any rank compiles, so it is rare and counted, not hidden).

The first step's compile also decides a failure: a compile that raises ends the rank with
`failed_reason`, the compiler's last line, which the search reads (`is_compile_failure`) to
stop offering compiled launches for the rest of the search.
"""
from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from ..config import Config

# A rank's reason for a compile that failed starts with this (worker/trainer.py writes it).
COMPILE_FAILED = "torch.compile failed"
# dynamo's advice appended to every error, never what broke
_BOILERPLATE = ("Set TORCHDYNAMO_VERBOSE", "For even more developer context", "You can suppress",
                "Use tlparse", "While executing", "Original traceback")


def failed_reason(message: str) -> str:
    """'torch.compile failed: <the compiler's last line>' from an exception's text (inductor's
    errors carry the whole compiler output; its last non-empty line says what broke)."""
    lines = [ln.strip() for ln in str(message).splitlines()
             if ln.strip() not in ("", "None") and not ln.strip().startswith(_BOILERPLATE)]
    return f"{COMPILE_FAILED}: {lines[-1][:300] if lines else 'no message'}"


def is_compile_failure(reason: str | None) -> bool:
    """Whether a trial's reason is a compile that failed (the runner names the rank first)."""
    return bool(reason) and COMPILE_FAILED in str(reason)


def compile_cost(report: Mapping[str, Any]
                 ) -> tuple[float | None, str | None, int | None]:
    """(compile_s, compile_cache, recompiles) from a rank's report; Nones when it did not
    compile or its report has no watch (the module doc says how each is made)."""
    watch = report.get("compile")
    if not isinstance(watch, Mapping):
        return None, None, None
    try:
        by_step = [int(n) for n in watch.get("frames_by_step") or ()]
        warmup = [float(t) for t in report.get("warmup_times") or ()]
        steps = [float(t) for t in report.get("step_times") or ()]
        in_window = int(watch.get("in_window") or 0)
        misses, built = int(watch.get("misses") or 0), bool(watch.get("built"))
    except (TypeError, ValueError):
        return None, None, None
    steady = statistics.median(steps) if steps else None
    compiling = [i for i, n in enumerate(by_step) if n > 0 and i < len(warmup)]
    seconds = None if steady is None else \
        round(sum(max(0.0, warmup[i] - steady) for i in compiling), 3)
    first = compiling[0] if built and compiling else None
    recompiles = sum(n for i, n in enumerate(by_step) if first is None or i > first) + in_window
    return seconds, "cold" if misses else "warm", recompiles


def launch_compile_cost(reports: Sequence[Mapping[str, Any]]
                        ) -> tuple[float | None, str | None, int | None]:
    """The launch's compile cost from every rank's report: the timed window opens on a barrier,
    so it waits for the slowest rank's compile (the largest compile_s); "cold" when any rank's
    cache was; the most recompiles any rank met."""
    costs = [c for c in (compile_cost(r) for r in reports) if c[1] is not None]
    if not costs:
        return None, None, None
    seconds = [c[0] for c in costs if c[0] is not None]
    return (max(seconds) if seconds else None,
            "cold" if any(c[1] == "cold" for c in costs) else "warm",
            max(c[2] or 0 for c in costs))


def graph_key(config: "Config") -> tuple:
    """What decides whether two compiled launches share inductor's cached graphs: the model's
    input shape (the micro-batch), its dtype and layout, IPEX, the device, and the threads a rank
    compiles for (inductor keys CPU kernels on torch.get_num_threads(); torch's default follows
    the ranks, so an unset count is keyed by them). A launch whose key none before it had
    compiles cold; one that shares a key finds the cache warm."""
    threads = config.threads if config.threads is not None else \
        ("default", config.nproc, config.ranks_per_numa_node, config.nnodes)
    return (config.micro_batch, config.precision, config.channels_last, config.ipex,
            config.device, threads)
