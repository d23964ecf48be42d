"""Execution time of a started batch: the profile's latency, or a draw from what calibration measured.

A policy plans every batch on its profile ℓ(b) (Shepherd Eq. 1, Symphony
§3.1). By default the engine runs the batch for exactly that long
(``--exec-time mean``: the profile is the batch's duration). A real worker
does not: calibration in the live harness (:mod:`shepherd.core.calibration`)
measures, per model and batch size, the spread of batch durations under serving
conditions. ``--exec-time measured`` makes each started batch run for a
duration drawn from that measured sample while the policy still plans on the
profile — as on a live worker, a policy reading ``running()`` sees the
profile's end, and the batch completes when its drawn duration ends.

Draws are reproducible from the seed and independent of everything else in
the run: worker ``w`` has its own generator (``default_rng([seed, SALT,
w])``), and its k-th batch takes the k-th uniform of that stream, mapped onto
the sorted sample (``sample[⌊u·n⌋]``, the empirical distribution). A
``scale`` multiplies every duration (the sensitivity of a result to a 1 %
error in batch time, :mod:`shepherd.core.validation`). The compiled fast
paths take execution from the profile only, so a run with an execution model
runs on the reference engine (:func:`shepherd.core.engine.simulate.simulate`
says so in one line).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from shepherd.core.errors import UserError

MODES = ("mean", "measured")
SALT = 0xE7EC  #: separates the execution draws from every other stream drawn from the run's seed
BLOCK = 1024  #: uniforms drawn per worker at a time


@dataclass(frozen=True)
class ExecutionModel:
    """How long a started whole-model batch runs (module docstring).

    ``samples_ms`` maps (model, batch size) to the durations (ms) measured under serving conditions on a
    worker that was busy just before (back to back), ``idle_samples_ms`` after an idle gap longer than
    ``idle_gap_us``; a batch draws from the sample of its worker's condition (the gap between the worker's
    last end and the batch's start). ``mode`` "mean" ignores them (the profile's latency is the duration),
    "measured" draws from them.
    """

    mode: str = "mean"
    samples_ms: Mapping[tuple[str, int], tuple[float, ...]] = field(default_factory=dict)
    scale: float = 1.0
    seed: int = 0
    idle_samples_ms: Mapping[tuple[str, int], tuple[float, ...]] = field(default_factory=dict)
    idle_gap_us: int = 2_000

    def validate(self) -> None:
        if self.mode not in MODES:
            raise UserError(f"--exec-time must be one of {', '.join(MODES)}, got '{self.mode}'")
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise UserError(f"execution scale must be a positive number, got {self.scale}")
        if self.mode == "measured" and not self.samples_ms:
            raise UserError("--exec-time measured needs a calibrated profile (shepherd calibrate) with "
                            "per-size samples")

    @property
    def trivial(self) -> bool:
        """True when every batch runs exactly its profile latency (the engine's default)."""
        return self.mode == "mean" and self.scale == 1.0

    def draws(self, models: list[str], lat: list[list[list[int]]], max_batch: int) -> "ExecutionDraws":
        """The per-run sampler over the run's dense tables (checks every size a batch may take has samples)."""
        self.validate()
        tables = []
        for samples in (self.samples_ms, self.idle_samples_ms or self.samples_ms):
            table: list[list[np.ndarray | None]] = []
            for m in models:
                row: list[np.ndarray | None] = [None]
                for b in range(1, max_batch + 1):
                    xs = samples.get((m, b))
                    if self.mode == "measured" and not xs:
                        raise UserError(f"--exec-time measured: the calibration has no sample for '{m}' at batch "
                                        f"{b} (calibrate every size up to --max-batch {max_batch})")
                    row.append(np.sort(np.rint(np.asarray(xs, float) * 1000.0).astype(np.int64)) if xs else None)
                table.append(row)
            tables.append(table)
        return ExecutionDraws(self, tables[0], tables[1], lat)


class ExecutionDraws:
    """One run's sampler: ``duration(worker, hw, model, size)`` in integer µs (module docstring)."""

    __slots__ = ("scale", "measured", "samples", "idle_samples", "idle_gap_us", "lat", "seed", "streams", "pos",
                 "planned_end")

    def __init__(self, model: ExecutionModel, samples: list[list[np.ndarray | None]],
                 idle_samples: list[list[np.ndarray | None]], lat: list[list[list[int]]]) -> None:
        self.scale = model.scale
        self.measured = model.mode == "measured"
        self.samples = samples
        self.idle_samples = idle_samples
        self.idle_gap_us = model.idle_gap_us
        self.lat = lat
        self.seed = model.seed
        self.streams: dict[int, tuple[np.random.Generator, np.ndarray]] = {}
        self.pos: dict[int, int] = {}
        #: per worker: the end the policy expects for its running batch (start + profile latency)
        self.planned_end: dict[int, int] = {}

    def _uniform(self, worker: int) -> float:
        got = self.streams.get(worker)
        if got is None:
            gen = np.random.default_rng([self.seed, SALT, worker])
            got = self.streams[worker] = (gen, gen.random(BLOCK))
            self.pos[worker] = 0
        k = self.pos[worker]
        if k == len(got[1]):
            got = self.streams[worker] = (got[0], got[0].random(BLOCK))
            k = 0
        self.pos[worker] = k + 1
        return float(got[1][k])

    def duration(self, worker: int, hw: int, model: int, size: int, start: int, gap: int) -> int:
        """The batch's run time, µs, on a worker idle for ``gap`` µs before ``start``; remembers the end its
        policy expects (``start`` + profile latency)."""
        planned = self.lat[hw][model][size]
        self.planned_end[worker] = start + planned
        if self.measured:
            xs = (self.idle_samples if gap > self.idle_gap_us else self.samples)[model][size]
            base = int(xs[min(int(self._uniform(worker) * len(xs)), len(xs) - 1)])
        else:
            base = planned
        return max(1, int(round(base * self.scale))) if self.scale != 1.0 else max(1, base)
