"""``EngineConfig``: every speed switch of the engine, in one place (STYLE.md pattern 14).

None of them changes an outcome (each has a test that says so); they trade
memory, events and Python work against each other. Policies never carry
speed switches in their own config.
"""

from __future__ import annotations

from dataclasses import dataclass

from shepherd.core.errors import UserError

RESERVED_MODES = ("events", "record")
GROUP_MODES = ("together", "apart")


@dataclass(frozen=True)
class EngineConfig:
    """Speed switches of one run (module docstring)."""

    #: arrivals per feed chunk, converted to Python lists once (``tests/test_engine.py``: any size, same outcomes)
    chunk: int = 1 << 15
    #: how far (µs) a run of arrivals may go past the earliest pending quiet event (:mod:`.clock`); any
    #: value gives the same outcomes — it bounds the quiet heap's size (PPipe G1: a lag of 1 s is ~40 %
    #: slower than 20 ms: a larger heap is slower to pop and keeps more objects alive)
    quiet_lag_us: int = 20_000
    #: batches booked on reserved paths (:mod:`.paths`): "events" — each one's completion is an engine
    #: event that checks the reservation (the reference); "record" — written at dispatch, no event
    reserved: str = "events"
    #: PPipe's probe() walks a per-pool index of vGPUs by free time (``core/pipelines/table.py``);
    #: False: the plain scan of Algorithm 2 (identical results, slower)
    pool_index: bool = True
    #: "auto" — a policy's compiled fast path (:mod:`.fast`, same outcomes) where it has one for the run's
    #: configuration, else the Python engine; "fast" — the fast path or an error; "reference" — the Python engine
    path: str = "auto"
    #: serving groups (Herd groups, sub-clusters): "together" — one loop; "apart" — each group its own run,
    #: merged into the same tables (:mod:`.groups`; falls back to one loop when something couples them)
    groups: str = "together"
    #: groups apart in this many worker processes (> 1 implies "apart")
    jobs: int = 1
    #: where groups run apart: "local" (this process, or ``jobs`` processes) or "ray" (a local Ray cluster of
    #: ``jobs`` CPUs, or ``ray_address``; implies "apart")
    executor: str = "local"
    ray_address: str | None = None
    #: "all" — every table; "summary" — a compiled fast path keeps only what the summary and the workers table
    #: need (running aggregates, :class:`~.aggregates.SummaryAggregates`: ``simulate --record summary``); the
    #: request and batch tables are then unavailable. The reference engine always keeps every table.
    record: str = "all"
    #: requests fed to a compiled fast path's kernel at a time (:mod:`.fast`): the rows that became final are
    #: written out between chunks, so the kernel's own memory follows the requests in flight, not the trace
    stream_chunk: int = 1 << 20

    def validate(self) -> None:
        if self.chunk < 1:
            raise UserError(f"engine chunk must be ≥ 1, got {self.chunk}")
        if self.quiet_lag_us < 0:
            raise UserError(f"engine quiet_lag_us must be ≥ 0, got {self.quiet_lag_us}")
        if self.groups not in GROUP_MODES:
            raise UserError(f"engine groups must be one of {', '.join(GROUP_MODES)}, got '{self.groups}'")
        if self.path not in ("auto", "reference", "fast"):
            raise UserError(f"--engine must be reference or fast (or auto), got '{self.path}'")
        if self.executor not in ("local", "ray"):
            raise UserError(f"unknown executor '{self.executor}' (known: local, ray)")
        if self.jobs < 1:
            raise UserError(f"--jobs must be ≥ 1, got {self.jobs}")
        if self.record not in ("all", "summary"):
            raise UserError(f"engine record must be all or summary, got '{self.record}'")
        if self.stream_chunk < 1:
            raise UserError(f"engine stream_chunk must be ≥ 1, got {self.stream_chunk}")
        if self.reserved not in RESERVED_MODES:
            raise UserError(f"engine reserved must be one of {', '.join(RESERVED_MODES)}, got '{self.reserved}'")
