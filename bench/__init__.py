"""Benchmarks of sas against a bare Temporal workflow (see docs/benchmarks.md)."""
