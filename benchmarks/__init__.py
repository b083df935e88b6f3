"""Benchmarks: speed claims measured side by side (figures in docs/benchmarks.md). Not part of the
default test run; tests/benchmarks/test_benchmarks_smoke.py checks that each one starts and writes its table."""
