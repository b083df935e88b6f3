"""torch.compile inside a rank: what it compiled step by step, and letting go of it.

torch has no public count of what dynamo compiled or of inductor's cache hits, so the watch
reads torch._dynamo.utils.counters (frames compiled, FX-graph cache hits and misses), which
`tlparse` and torch's own tests read; a torch without them gives no counts, and the trial's
compile fields stay unknown rather than wrong. measure/compile_cost.py does the arithmetic.

Letting go (`forget`): dynamo keeps compiled code on the code object it compiled, here
DistributedDataParallel.forward, guarded on the model object. A trainer built anew for a window
of another configuration (a kept launch: worker/session.py) would fail those guards and count as
a recompile of the same code; after torch._dynamo.config.recompile_limit (8) of them dynamo
silently runs eager. So a compiled trainer that is dropped resets dynamo (torch.compiler.reset,
public), and the next one compiles afresh: from inductor's on-disk cache when its graphs were
compiled before (warm: seconds here), or cold for a changed shape (a new batch). That costs a
window less than the alternative, a fresh launch: the same compile plus the launch's start,
imports and process group.
"""
from __future__ import annotations

from typing import Any

import torch


def counts() -> dict[str, int]:
    """Frames compiled and inductor's FX-graph cache hits and misses, so far in this process."""
    try:
        from torch._dynamo.utils import counters
    except Exception:  # noqa: BLE001 - a torch without them: nothing counted
        return {}
    return {"frames": int(counters["frames"]["total"]),
            "hits": int(counters["inductor"]["fxgraph_cache_hit"]),
            "misses": int(counters["inductor"]["fxgraph_cache_miss"])}


class CompileWatch:
    """One window's watch over a compiled trainer: `built` says whether this window built the
    compiled model (else it kept the last window's)."""

    def __init__(self, *, built: bool) -> None:
        self.built = built
        self.start = self.mark = counts()
        self.frames_by_step: list[int] = []
        self.in_window = 0

    def _since_mark(self) -> int:
        now = counts()
        n = now.get("frames", 0) - self.mark.get("frames", 0)
        self.mark = now
        return n

    def warmup_step(self) -> int:
        """Frames compiled in the warm-up step just taken (also recorded)."""
        n = self._since_mark()
        self.frames_by_step.append(n)
        return n

    def window_start(self) -> None:
        self._since_mark()

    def window_end(self) -> None:
        self.in_window = self._since_mark()

    def report(self) -> dict[str, Any]:
        end = counts()
        return {"built": self.built, "frames_by_step": self.frames_by_step,
                "in_window": self.in_window,
                "hits": end.get("hits", 0) - self.start.get("hits", 0),
                "misses": end.get("misses", 0) - self.start.get("misses", 0)}


def compile_error(exc: BaseException) -> bool:
    """Whether `exc` is the compiler failing (inductor, its C++ or Triton compiler, a backend),
    not the workload's own code failing under dynamo's trace."""
    try:
        from torch._dynamo.exc import BackendCompilerFailed
    except Exception:  # noqa: BLE001
        return False
    return isinstance(exc, BackendCompilerFailed)


def compile_message(exc: BaseException) -> str:
    """What broke, from the innermost error a compile failure wraps (dynamo wraps inductor's,
    which wraps the compiler's: InvalidCxxCompiler, CppCompileError with its output), named by
    its type: measure/compile_cost.failed_reason takes its last line."""
    inner: BaseException = exc
    while isinstance(getattr(inner, "inner_exception", None), BaseException):
        inner = inner.inner_exception   # type: ignore[attr-defined]
    return f"{type(inner).__name__}: {inner}"


def forget() -> None:
    """Drop every compiled graph this process holds (the module doc says why)."""
    torch.compiler.reset()
