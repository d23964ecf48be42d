"""The :class:`Policy` interface: declare inputs, prepare tables, react to events through ``Actions``.

A policy class declares the artifact kinds it ``requires`` and builds its own
dense tables before the run in :meth:`Policy.prepare` (default: whole-model
latency tables from α/β profiles on ``--gpus`` or a plan; see
``core.engine.inputs``). ``simulate()`` makes one instance per serving group,
``cls(act, config)``, where ``act`` is the group's
:class:`~shepherd.core.engine.actions.Actions` (what it may see and call).

Events: ``on_arrivals`` (a run of arrivals that all happen before the next
queued event), ``on_completion`` (a worker finished its batch), ``on_timer``
(a timer set with ``act.set_timer`` fired and was not cancelled).

Contract of ``on_arrivals(ts, ds, ms, ss, rs, lo, hi)``: the lists hold the
arrival time, deadline, model index, stream and global request id of a chunk
of this group's arrivals; handle them from index ``lo`` while
``ts[i] < act.until`` and return the first index not handled. An action may
lower ``act.until`` (a batch that completes before the next arrival, a
timer): a policy overriding ``on_arrivals`` reads it again after acting. The
default implementation does so and calls :meth:`Policy.on_arrival` per request.
"""

from __future__ import annotations

from typing import Any, ClassVar

from shepherd.core.engine.actions import Actions
from shepherd.core.engine.fastpath import FastPath
from shepherd.core.engine.inputs import Inputs, Runtime, whole_model_runtime
from shepherd.core.engine.overhead import OverheadConfig


class Policy:
    """Base class of every online policy (one instance per serving group)."""

    #: artifact kinds ``simulate()`` must be given for this policy (``core.artifacts`` kinds)
    requires: ClassVar[tuple[str, ...]] = ("profiles",)
    #: default scheduler-overhead model of this policy (see core.engine.overhead)
    default_overhead: ClassVar[OverheadConfig] = OverheadConfig()
    #: the policy's compiled fast path (:mod:`shepherd.core.engine.fastpath`), None: the reference engine only
    fast_path: ClassVar[FastPath | None] = None

    def __init__(self, act: Actions, config: Any) -> None:
        self.act = act
        self.config = config

    @classmethod
    def prepare(cls, inputs: Inputs, config: Any) -> Runtime:
        """The cluster and tables of a run (once, before any instance is made)."""
        if hasattr(config, "validate"):
            config.validate()
        return whole_model_runtime(inputs)

    # events ---------------------------------------------------------------
    def on_start(self, now: int) -> None:
        """Called once before the first event (set initial timers here)."""

    def on_arrivals(self, ts: list[int], ds: list[int], ms: list[int], ss: list[int],
                    rs: list[int], lo: int, hi: int) -> int:
        act = self.act
        for i in range(lo, hi):
            t = ts[i]
            if t >= act.until:
                return i
            self.on_arrival(t, rs[i], ms[i], ds[i], ss[i])
        return hi

    def on_arrival(self, now: int, rid: int, model: int, deadline: int, stream: int) -> None:
        raise NotImplementedError

    def on_completion(self, now: int, worker: int) -> None:
        """``worker`` finished its batch (an allocation's: its first worker)."""

    def on_timer(self, now: int, payload: Any) -> None:
        """A timer set with ``act.set_timer`` fired."""

    def on_finish(self, now: int) -> None:
        """No events left; requests still queued end as dropped (the engine marks them)."""

    def stats(self) -> dict[str, Any]:
        """Counters of the run (summed over groups into ``result.extra["policy_stats"]``)."""
        return {}
