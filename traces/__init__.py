"""Workloads: arrival processes, synthetic generators, real-trace readers."""
