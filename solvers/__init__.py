"""Planners (ILP/MILP formulations) and the solver-backend seam."""
