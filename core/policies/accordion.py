"""Accordion (CF '25) and its baselines: how many EPs a query gets (Accordion §3.3, §4.2).

Everything they share — queues, dropout predictor, configurations, the
shrink mechanics — is :mod:`shepherd.core.accordion.scheduler`; each class
here is the one decision of its scheduler.
"""

from __future__ import annotations

from shepherd.core.accordion.scheduler import EPConfig, EPScheduler, Query
from shepherd.core.policies.registry import register


@register("one-stage", EPConfig)
class OneStage(EPScheduler):
    """1-Stage (§4.2 (4)): exactly one EP per query."""

    def place(self, q: Query, now: int) -> bool:
        if not self.free:
            return False
        self.start_query(q, 1, now)
        return True


@register("fastest", EPConfig)
class Fastest(EPScheduler):
    """Fastest (§4.2 (2)): "allocates the maximum feasible resources to incoming queries" — the deepest
    configuration a query may hold (8 EPs, §4.1; fewer only if the server or the model has fewer) — and
    waits until that many EPs are free (§4.4.5: "even if there are slightly fewer available EPs than those
    required, they will not be used"). The paper's "fastest pipeline configuration" is that one on Table 1,
    whose speedups grow with the depth; on a profile where a shallower pipeline is as fast, the maximum
    feasible resources still decide (our first version took the arg-min-latency depth instead)."""

    def place(self, q: Query, now: int) -> bool:
        d = self.max_depth(q.model)
        if len(self.free) < d:
            return False
        self.start_query(q, d, now)
        return True


@register("slo-conforming", EPConfig)
class SloConforming(EPScheduler):
    """SLO-Conforming (§4.2 (1)): the fewest EPs meeting the query's SLO (the fastest if none does)."""

    def place(self, q: Query, now: int) -> bool:
        d = self.required_depth(q)
        if len(self.free) < d:
            return False
        self.start_query(q, d, now)
        return True


@register("bbs", EPConfig)
class BufferBased(SloConforming):
    """BBS (§4.2 (3)): without enough free EPs, queue behind a running query of the same model and SLO
    and run on its EP set when it completes; otherwise wait (SLO-Conforming allocation)."""

    def place(self, q: Query, now: int) -> bool:
        if super().place(q, now):
            return True
        slo = q.deadline - q.arrival
        for lead in self.active.values():
            if lead.model == q.model and lead.deadline - lead.arrival == slo:
                lead.buffer.append(q)
                self.n_buffered += 1
                return True
        return False

    def hand_over(self, q: Query, now: int) -> bool:
        if not q.buffer:
            return False
        nxt = q.buffer.pop(0)
        nxt.buffer = q.buffer
        self.start_query(nxt, len(q.workers), now, workers=q.workers)
        return True


@register("accordion", EPConfig)
class Accordion(EPScheduler):
    """Accordion (Algorithm 2): best configuration if free; else enough free EPs if they meet the SLO;
    else shrink active pipelines one stage at a time while their SLO holds (confirm_SLO) and assign the
    minimal requirement; else wait.

    Readings of the pseudo-code, documented:

    * ``Fetch_EPs`` runs whenever the free EPs are too few to meet the SLO (line 11 prints ``Free_EPs ==
      0``; §3.3's prose: "If there are insufficient free EPs, it evaluates whether the available resource
      capacity can still meet the SLO. As a fallback, it reviews … active pipelines"). The shrinks are
      planned first and applied only if they free enough EPs (line 29 prints ``== EP_set``; the
      pseudo-code may shrink pipelines and still make the query wait), and they stop once enough EPs are
      free (§3.3: "we remove the number of EPs that need to be fetched").
    * ``get_minimal_EP_requirement`` of a query that no configuration serves within its SLO (it will be
      late anyway) is its best assignment (line 3): such a query runs on its fastest configuration, from
      free EPs or EPs fetched under confirm_SLO, or waits — line 6's "less but enough EPs" does not apply
      to it (``late=best``, default). ``late=free`` is the other completion of the pseudo-code, our first
      version: such a query starts on whatever EPs are free (up to its best), down to 1 EP, and never
      shrinks others — fewer Strict violations (it does not wait at the head of its queue), but on the
      Strict target a 300-instance ResNet152 query then held one EP for ≈ 25 min and set the stream's end.
    """

    def place(self, q: Query, now: int) -> bool:
        best = self.fastest_depth(q.model, q.left)
        nfree = len(self.free)
        if nfree >= best:
            self.start_query(q, best, now)
            return True
        budget = q.deadline - now
        if nfree and self.lat_us(q.model, nfree, q.left) <= budget:
            self.start_query(q, nfree, now)  # "assign less but enough EPs"
            return True
        need = self.slo_depth(q.model, q.left, budget)
        if need is None:
            if self.config.late == "free":
                if nfree:
                    self.start_query(q, nfree, now)
                    return True
                return False
            need = best  # no configuration meets the SLO: get_minimal_EP_requirement = the best assignment
        plan, deficit = [], need - nfree
        for s in list(self.active.values()):
            if deficit <= 0:
                break
            depth = s.depth
            while depth > 1 and deficit > 0 and self.confirm_slo(s, depth - 1, now):
                depth -= 1
                deficit -= 1
            if depth < s.depth:
                plan.append((s, depth))
        if deficit > 0:
            return False
        for s, depth in plan:
            self.shrink(s, depth, now)
        self.start_query(q, need, now)
        return True
