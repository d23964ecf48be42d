"""Shepherd (NSDI '23) experiments: one module per figure or table of §7."""
