"""Symphony (seed 003) experiments: one module per figure or table."""
