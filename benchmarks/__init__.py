"""Benchmarks as code; results in docs/benchmarks.md."""
