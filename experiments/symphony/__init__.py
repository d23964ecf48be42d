"""Symphony (Ng et al.): the experiments of §3–§5, one module per figure or table."""
