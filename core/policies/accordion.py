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
    """Fastest (§4.2 (2)): the fastest configuration; wait until its EPs are free."""

    def place(self, q: Query, now: int) -> bool:
        d = self.fastest_depth(q.model, q.left)
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

    Deviation, documented: the shrinks are planned first and applied only if they free enough EPs (the
    pseudo-code may shrink pipelines and still make the query wait), and they stop once enough EPs are
    free. A query no configuration can serve within its SLO takes the free EPs (up to its fastest
    configuration) and never shrinks others.
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
            if nfree:
                self.start_query(q, nfree, now)
                return True
            return False
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
