"""Accordion (CF '25) experiments: Fig. 1 (§2.1) and Figs. 3, 5–9 (§4.4)."""
