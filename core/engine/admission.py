"""Admission control at the frontend: shed the arrivals an overloaded scheduler cannot keep up with.

Shepherd §7.1 (Fig. 10): a centralised scheduler that gets more work than it
can do *saturates* — its goodput plateaus near its capacity ("saturates at 50k
request/second around N = 200") — rather than collapsing. In the overhead
model (:mod:`.overhead`) each group's scheduler is a single server: admitted
arrivals and decisions are its jobs, ``free ← max(free, t) + cost``. An
arriving request ``a`` is **shed** when the backlog it finds,
``free − a`` with every job handled before it charged, exceeds the bound ``B``
(``OverheadConfig.max_lag_us``): it costs the scheduler nothing, is marked
dropped, and is never handed to the policy (it never reaches ``on_arrivals``).

Exactness. The result is the literal per-request recursion (``tests/test_admission.py``):
arrivals are examined in trace order, each against the scheduler state left
by every admitted arrival before it and every decision the policy made before
reaching it. The engine gets there without per-arrival work in the common case:

* *O(1) test per run of arrivals* (inlined in ``Engine._arrivals``): with
  ``p`` arrivals admitted but not yet charged (``feed.charged`` … ``pos``),
  arrival ``k`` of the run finds a backlog of at most
  ``max(free − a_pos, 0) + (k − charged)·c`` (``c`` = cost of an arrival), so
  every ``k < charged + 1 + (B − max(free − a_pos, 0)) // c`` is admitted
  whatever comes before it — the run is handed to the policy up to there
  (``feed.lim``).
* *Decisions inside the run* raise ``free``: after each one,
  :meth:`Admission.recheck` applies the same bound from the decision time
  to the rest of the handed run and, if it no longer holds, lowers
  the clock's ``until`` to the decision's time so that the policy returns at the
  next arrival and the engine examines the rest again (stopping a run early is
  always safe: :mod:`.events`).
* *Only when the bound fails* does :meth:`Admission.admit` walk arrivals one
  by one (at most :data:`ADMIT_WINDOW` per call) with the exact recursion,
  shedding the first arrival of the run if its backlog exceeds ``B`` and
  handing the admitted ones before the next shed.

A shed arrival needs no change to the feed's lists: when arrival ``k`` is shed
the arrivals before ``a_k`` are charged (exact: every later job comes at
``≥ a_k``), so the admitted arrivals not yet charged all arrive at ``a_k``,
like ``k`` itself; advancing ``feed.charged`` by one leaves exactly their
times to be charged.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left

from shepherd.core.engine.clock import Clock
from shepherd.core.engine.feed import Feed
from shepherd.core.engine.outcomes import DROPPED
from shepherd.core.engine.overhead import SchedulerClock

#: arrivals examined one by one per call of :meth:`Admission.admit` (bounds the work between
#: hand-overs when the O(1) test fails but little is shed)
ADMIT_WINDOW = 64


class Admission:
    """Each group's scheduler-overhead clock fed with its arrivals, and frontend admission control."""

    __slots__ = ("sched", "feeds", "clock", "outcome", "shed_ids")

    def __init__(self, sched: list[SchedulerClock], feeds: list[Feed], clock: Clock, outcome) -> None:
        self.sched, self.feeds, self.clock, self.outcome = sched, feeds, clock, outcome
        self.shed_ids = array("q")  #: requests shed by admission control, in order

    def charge_until(self, g: int, now: int) -> None:
        """Charge the group's scheduler for the arrivals before ``now`` not yet charged."""
        feed = self.feeds[g]
        upto = bisect_left(feed.t, now, feed.charged, feed.hi)
        if upto > feed.charged:
            self.sched[g].charge_arrivals(feed.tn[feed.charged:upto])
            feed.charged = upto

    def decide(self, g: int, now: int, size: int) -> int:
        """Charge group ``g``'s scheduler for a decision about a batch of ``size`` made at ``now``
        (the arrivals before it first, then the admission re-check); returns when it takes effect, µs."""
        sched = self.sched[g]
        if sched.arrival_ns:
            self.charge_until(g, now)
        disp = sched.decide(now, size)
        if sched.admit:
            self.recheck(g, now)
        return disp

    def decision_time(self, g: int, now: int) -> int:
        """The scheduler's own clock for a decision made at ``now`` (≥ now; see overhead)."""
        sched = self.sched[g]
        if sched.arrival_ns:
            self.charge_until(g, now)
        return sched.ready_us(now)

    def admit(self, g: int, feed: Feed) -> int:
        """Examine the arrivals from ``feed.pos`` one by one: shed those at the head of the run whose
        backlog exceeds the bound, stop before the next one; returns the index the policy may be
        handed arrivals up to (``feed.pos`` when nothing before ``until`` is left)."""
        sched = self.sched[g]
        t = feed.t
        c, bound = sched.arrival_ns, sched.max_lag_ns
        until = self.clock.until
        pos = feed.pos
        if c:
            self.charge_until(g, t[pos])  # exact: no later job comes before t[pos]
            a0 = t[pos] * 1000
            # the admitted arrivals not yet charged all arrive at t[pos]
            f = max(sched.free_ns, a0) + (pos - feed.charged) * c
        else:  # emulation: arrivals are charged their measured time after each run
            f = sched.free_ns
        stop = min(feed.hi, pos + ADMIT_WINDOW)
        k = pos
        outcome, rids = self.outcome, feed.r
        while k < stop:
            tk = t[k]
            if tk >= until:
                break
            a = tk * 1000
            if f - a > bound:
                if k > pos:
                    return k  # hand the admitted ones first: their decisions come before k
                if c:  # shed k: charge what came before a_k, then skip one arrival at a_k
                    if feed.charged < k:
                        self.charge_until(g, tk)
                    feed.charged += 1
                outcome[rids[k]] = DROPPED
                self.shed_ids.append(rids[k])
                sched.shed += 1
                pos = feed.pos = k + 1
            elif f > a:
                f += c
            else:
                f = a + c
            k += 1
        return k

    def recheck(self, g: int, now: int) -> None:
        """After a decision at ``now``: if an arrival of the handed run might now find a backlog
        above the bound, end the run at the next arrival (see module docstring)."""
        sched = self.sched[g]
        feed = self.feeds[g]
        clock = self.clock
        if (sched.free_ns - now * 1000 + (feed.lim - 1 - feed.charged) * sched.arrival_ns > sched.max_lag_ns
                and now < clock.until):
            clock.until = now
