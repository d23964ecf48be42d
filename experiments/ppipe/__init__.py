"""PPipe (ATC 2025) experiments: one module per figure (Figs. 2, 6, 7, 8, 10, 13, 14)."""
