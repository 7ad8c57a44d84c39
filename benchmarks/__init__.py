"""Benchmarks: they print figures and write them to results/, they assert nothing."""
