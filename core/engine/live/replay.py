"""Replay a live run's decisions in the simulator.

A live run logs every decision its policy made (:func:`~shepherd.core.engine.live.decisions_frame`:
when, start / book / preempt, worker, model, request ids). :func:`replay` feeds
that log to the discrete-event engine through a policy that decides nothing
itself: at each decision's time it makes the same call through the same
:class:`~shepherd.core.engine.actions.Actions` (a start on a worker the
simulation still has busy becomes a booking: the live worker was free there, the
simulated one is not yet). The simulated tables then say what the profile
predicts for exactly the live run's batches — the part of the live-vs-simulated
gap that is execution, not scheduling.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from shepherd.core.engine.overhead import OverheadConfig
from shepherd.core.engine.result import SimulationResult
from shepherd.core.policies import registry
from shepherd.core.policies.base import Policy

NAME = "live-replay"  #: registered only while :func:`replay` runs


class _Replay(Policy):
    """Re-issues a logged decision sequence (module docstring)."""

    log: list[tuple[int, str, int, int, list[int]]] = []

    def on_start(self, now: int) -> None:
        for i, row in enumerate(self.log):
            self.act.set_timer(max(row[0], 0), i)

    def on_arrival(self, now: int, rid: int, model: int, deadline: int, stream: int) -> None:
        pass  # requests wait for their logged decision

    def on_timer(self, now: int, payload: Any) -> None:
        _, action, worker, model, rids = self.log[payload]
        act = self.act
        if action == "preempt":
            if act.busy(worker):
                act.preempt(worker, now, 0)
            return
        act.book(worker, model, list(rids), now)


def replay(live: SimulationResult, decisions: pl.DataFrame, trace: pl.DataFrame, profiles: pl.DataFrame,
           **kw: Any) -> SimulationResult:
    """Simulate ``trace`` with ``live``'s decisions (the same workers, models and request ids)."""
    from shepherd.core.engine.simulate import simulate

    log = [(int(t), a, int(w), int(m), list(r)) for t, a, w, m, r in decisions.iter_rows()]
    cls = type("LiveReplay", (_Replay,), {"log": log})
    registry.register(NAME)(cls)
    try:
        return simulate(trace, profiles, NAME, gpus=len(live.engine.res.w_group),
                        overhead=OverheadConfig(mode="none"), **kw)
    finally:
        registry.unregister(NAME)
