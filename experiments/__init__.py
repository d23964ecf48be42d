"""Experiments: one module per paper figure, as data."""
