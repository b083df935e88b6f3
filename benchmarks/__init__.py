"""Benchmarks, a package per question they answer (figures, machines and commands:
docs/benchmarks.md; the table of modules: benchmarks/README.md). Not part of the default test run:
tests/benchmarks/ checks, on small inputs, that they start and what their arithmetic says.

  landscapes/  a machine's landscape, every configuration's speed and accuracy: the table and its
               file, recorded here or on a many-core machine, or modelled for machines we lack
  replay/      the real search replayed on a landscape, in seconds: trials to the best
  timed/       one mechanism timed (or counted) in real trials on this machine, side by side
  accuracy/    the accuracy side measured: the gate's error rates, the quality runs' noise
  device/      the GPU machine's run and kit
  workloads/   entry points and scripts that the benchmarks and the integration tests tune
  results/     what each benchmark wrote

Floors, lowest first (tests/benchmarks/test_benchmark_floors.py): this file and workloads/;
landscapes/; replay/ and timed/; accuracy/; device/.

A module's old flat name (before issue 55), run with `python -m` or imported, fails in one line
that names the new one (MOVED).
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]          # the checkout
RESULTS = ROOT / "benchmarks" / "results"           # what each benchmark wrote, kept at its path


def out_folder_problem(out: str | Path) -> str | None:
    """Make a benchmark's --out folder before anything is measured; why it cannot be, else None
    (window_cost and hosts_window_cost measured for minutes and then failed to write into a
    folder that did not exist, the figures only on the terminal)."""
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"--out {out}: cannot make it a folder ({exc.strerror or exc})"
    return None

# old module name -> its new one, below benchmarks.
MOVED = {
    "landscape": "landscapes.record (the table itself: benchmarks.landscapes.table)",
    "landscape_record": "landscapes.record",
    "landscape_formats": "landscapes.formats",
    "landscape_checks": "landscapes.checks",
    "landscape_model": "landscapes.model",
    "memory_model": "landscapes.memory_model",
    "model_machines": "landscapes.model_machines",
    "sixteen_cores": "landscapes.sixteen_cores",
    "many_cores": "landscapes.many_cores",
    "many_cores_plan": "landscapes.many_cores_plan",
    "two_machines": "landscapes.two_machines",
    "search_efficiency": "replay.efficiency",
    "replay_report": "replay.report",
    "search_variants": "replay.variants",
    "search_guides": "replay.guides",
    "recorded_search": "replay.recorded",
    "search_at_scale": "replay.at_scale",
    "memory_placement": "replay.memory_placement",
    "data_stage": "replay.data_stage",
    **{name: f"timed.{name}" for name in (
        "speedup", "overhead", "verification_spread", "window_cost", "split_timers",
        "fp16_conv_grad", "intel_ab", "worker_repeat", "run_worker", "concurrent_searches",
        "data_bound_search", "backends", "backend_ranks", "ccl_exit_aborts", "hosts_startup",
        "machine")},
    "accuracy_gate": "accuracy.gate",
    "gate_runs": "accuracy.gate_runs",
    "gate_replay": "accuracy.gate_replay",
    "quality_length": "accuracy.quality_length",
    "device_run": "device.run",
    "device_kit": "device.kit",
}


def moved_line(fullname: str) -> str:
    return f"{fullname} has moved to benchmarks.{MOVED[fullname.partition('.')[2]]}"


class _Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers for the old names only, after every real finder has said no. `python -m` asks the
    loader for a code object (runpy), which prints the line and exits 2; an import runs
    exec_module, which raises ImportError with the same line."""

    def find_spec(self, fullname, path=None, target=None):
        package, _, name = fullname.partition(".")
        if package != __name__ or name not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        raise ImportError(moved_line(module.__name__), name=module.__name__)

    def get_code(self, fullname):
        return compile(f"import sys\nsys.stderr.write({moved_line(fullname) + chr(10)!r})\n"
                       "raise SystemExit(2)\n", fullname, "exec")


if not any(isinstance(finder, _Moved) for finder in sys.meta_path):
    sys.meta_path.append(_Moved())
