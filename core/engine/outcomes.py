"""Per-request outcome codes of the engine's ``r_outcome`` array (DESIGN.md "Output")."""

PENDING, SERVED, LATE, DROPPED = 0, 1, 2, 3
OUTCOMES = ("pending", "served", "late", "dropped")
