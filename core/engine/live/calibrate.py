"""The calibration run: every batch size measured in the live worker harness, under serving conditions.

A profile measured alone (``profile --measure``: one process, repeats of one
size in a row, the median kept) does not describe a serving worker: there the
worker is a separate process fed over a pipe, the engine and the sender run
beside it, batches of different sizes follow one another back to back or after
an idle gap, and each decision costs a dispatch and a report hop. This module
runs exactly that harness (:class:`~.pool.Pool`: one worker pinned to its core,
one PyTorch thread; the sender replaying a Poisson trace of its own, the engine
receiving it) and measures, per batch:

* its execution (worker-side start → end, wall) and the worker's CPU time over it;
* the idle gap before it (a seeded half of the batches follow the previous one
  back to back, the others after an idle gap of 0.5–2 × the size's latency), so
  both conditions a serving worker meets are in the sample;
* the dispatch delay (engine send → worker start) and the report delay
  (worker end → engine receive): their sum is what one decision costs between
  two batches;
* the frontend hop of every calibration request (sender's due time → the
  engine's receipt).

Sizes run in a seeded random order, ``repeats`` times each, every size
1…``max_batch`` (nothing interpolated). The calibration trace has its own
seed: it is never a validated run's trace (:mod:`shepherd.core.calibration`).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from shepherd.core.engine.live.pool import Pool
from shepherd.core.errors import UserError

SALT = 0xCA1B  #: the calibration's own stream: its order, gaps and trace never coincide with a validated run's
IDLE_SHARE = 0.5  #: share of batches that start after an idle gap (the rest back to back)
WARM_BATCHES = 2  #: unrecorded batches per size before the measured ones (first calls allocate)


def _wait_done(pool: Pool, bid: int, received: dict[int, int], limit_s: float = 120.0) -> tuple[tuple, int]:
    """Block until the worker reports ``bid``; arrivals seen meanwhile are stamped in ``received``."""
    stop = time.monotonic() + limit_s
    while time.monotonic() < stop:
        for kind, _who, msg in pool.poll(0.05):
            if kind == "dead":
                raise UserError(f"calibration failed: {msg}")
            if kind == "arrivals":
                if msg is not None:
                    now = pool.now()
                    for rid in msg:
                        received[rid] = now
            elif msg[1] == bid:
                return msg, pool.now()
    raise UserError(f"calibration failed: the worker did not finish batch {bid} within {limit_s:g} s")


def _idle(pool: Pool, until_us: int, received: dict[int, int]) -> None:
    """Wait (serving the sender's arrivals) until the run's clock reaches ``until_us``."""
    while True:
        left = until_us - pool.now()
        if left <= 0:
            return
        for kind, _who, msg in pool.poll(min(left / 1e6, 0.05)):
            if kind == "arrivals" and msg is not None:
                now = pool.now()
                for rid in msg:
                    received[rid] = now
            elif kind == "dead":
                raise UserError(f"calibration failed: {msg}")


def run_calibration(model: str, max_batch: int, repeats: int, seed: int, *, rate_rps: float | None = None,
                    cores: list[int] | None = None, stream: tuple[int, ...] = (),
                    progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Measure ``model`` at every size 1…``max_batch``, ``repeats`` times each (module docstring).

    Its order, gaps and trace come from ``default_rng([seed, SALT, *stream])``: ``stream`` separates further
    calibrations drawn from one seed (the speed probes bracketing a validated run,
    :func:`shepherd.core.calibration.speed_probe`). Returns per-batch arrays (size, after_idle, gap_us, exec_us,
    cpu_us, dispatch_us, report_us), the hop of every calibration request (µs), the calibration trace's rate and
    length, and the worker's core."""
    if repeats < 2:
        raise UserError(f"--repeats must be ≥ 2 (a spread needs two samples), got {repeats}")
    rng = np.random.default_rng([seed, SALT, *stream])
    pool = Pool(1, [model], max_batch, cores)
    sizes = np.arange(1, max_batch + 1)
    try:
        pool.start()
        bid = 0
        est = np.zeros(max_batch + 1)
        received: dict[int, int] = {}
        for b in sizes:  # warm each size, and estimate ℓ(b) for the gaps and the trace's rate
            for _ in range(WARM_BATCHES):
                pool.send(0, bid, 0, int(b), pool.now())
                msg, _ = _wait_done(pool, bid, received)
                est[b] = (msg[3] - msg[2]) / 1000.0
                bid += 1
        order = rng.permutation(np.repeat(sizes, repeats))
        idle = rng.random(len(order)) < IDLE_SHARE
        gap_us = np.where(idle, rng.uniform(0.5, 2.0, len(order)) * est[order], 0.0).astype(np.int64)
        capacity = max(b / (est[b] / 1e6) for b in sizes)
        rate = float(rate_rps) if rate_rps is not None else capacity
        span_s = (est[order].sum() + gap_us.sum()) / 1e6 * 1.5 + 1.0
        n_req = int(rng.poisson(rate * span_s))
        arrivals = np.sort(rng.uniform(0, span_s * 1e6, n_req)).astype(np.int64)
        pool.begin(arrivals)
        _idle(pool, 0, received)
        rows = np.zeros((len(order), 6), np.int64)  # gap, exec, cpu, dispatch, report, start
        last_end = pool.now()
        for i, (b, gap) in enumerate(zip(order.tolist(), gap_us.tolist())):
            if gap:
                _idle(pool, last_end + gap, received)
            sent = pool.now()
            pool.send(0, bid, 0, b, sent)
            msg, rx = _wait_done(pool, bid, received)
            t0 = pool.t0_ns
            start, end = (msg[2] - t0) // 1000, (msg[3] - t0) // 1000
            rows[i] = (start - last_end, end - start, msg[5] // 1000, start - sent, rx - end, start)
            last_end = rx
            bid += 1
            if progress is not None:
                progress(i + 1, len(order))
        hop = np.array([received[r] - arrivals[r] for r in sorted(received) if r < n_req], np.int64)
    finally:
        pool.close()
    return {"size": order.astype(np.int32), "after_idle": idle, "gap_us": rows[:, 0], "exec_us": rows[:, 1],
            "cpu_us": rows[:, 2], "dispatch_us": rows[:, 3], "report_us": rows[:, 4], "hop_us": hop,
            "trace_rate_rps": rate, "trace_s": span_s, "trace_requests": n_req, "worker_core": pool.worker_cores[0],
            "engine_core": pool.engine_core, "shared_cores": pool.shared_cores, "warm_estimate_ms": (est[1:] / 1000.0).tolist()}
