"""Pool-based pipelines (PPipe, ATC '25): block profiles, clusters, plans, reservations.

* :mod:`.blocks` — per-block latency by GPU type × MPS share × batch size, cut sizes,
  SLOs (the PPipe authors' data, ``shepherd profile --from-ppipe``), pre-partitioning (§5.2).
* :mod:`.cluster` — heterogeneous clusters HC1–HC4 (Table 1), servers sharing a NIC.
* :mod:`.plan` — pooled pipelines as planned (artifact kind ``pipeline_plan``) and
  their placement onto virtual GPUs and servers.
* :mod:`.reservations` — resource tables, ``earliestSlot``, ``probe``/``reserve``
  (Appendix A.3, Algorithm 2).
* :mod:`.artifacts` — the two artifact kinds registered here: ``block_profiles``
  and ``pipeline_plan``.
"""

from shepherd.core.pipelines import artifacts as _artifacts  # noqa: F401,E402 - registers the kinds
