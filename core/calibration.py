"""Calibration: a profile measured under serving conditions, with its spread and the harness's delays.

``shepherd calibrate`` runs :func:`shepherd.core.engine.live.calibrate.run_calibration`
(the live worker harness, every batch size, back to back and after idle gaps)
and turns it into a *profiles* artifact the simulator and the live engine both
read:

* ``latency_ms`` per batch size = the **mean** measured duration (what a
  policy plans on; the simulator's ``--exec-time mean``), with ``median_ms``,
  ``cv`` and the measured sample itself — ``samples_ms`` (after a busy worker,
  back to back) and ``idle_samples_ms`` (after an idle gap) — which
  ``--exec-time measured`` draws from (:mod:`shepherd.core.engine.execution`);
* α, β, R² of a least-squares line over every size, for reading only (each
  size is measured, so nothing inside the range comes from the line);
* ``exit_points`` = the model's layer boundaries (a live worker can stop a
  batch between two layers: L layers give L − 1 points; Shepherd §5.2's exit
  points, which Flex then assumes instead of Table 4's 50);
* in the artifact's metadata (``calibration``): the decision delay (dispatch
  + report hop between two batches) and the frontend hop, as mean, median and
  p99 (ms); the calibration trace's seed, rate and length; the share of batch
  time the worker waited for its core (how quiet the machine was).

Calibration never shares a run with validation: its trace is its own (seed
stream :data:`~shepherd.core.engine.live.calibrate.SALT`), and the artifact
records that provenance. :func:`drift` compares two calibrations.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import polars as pl

from shepherd.core.errors import UserError
from shepherd.core.profiles import non_monotone

HARDWARE = "cpu-1t"  #: the live worker: one core, one PyTorch thread
SOURCE = "calibrated:live-harness"
#: in the simulator, a batch that starts more than this long after its worker's last batch ended draws from
#: the after-idle sample (µs): longer than a back-to-back turnaround (report + dispatch, ≈ 0.5–1 ms on a quiet
#: machine) by a margin, and shorter than the calibration's idle gaps (≥ 0.5·ℓ(b))
IDLE_GAP_US = 2_000


def _q(xs: np.ndarray, q: float) -> float:
    return float(np.percentile(xs, q)) if len(xs) else math.nan


def summarize(model: str, raw: dict[str, Any], layers: int, seed: int) -> tuple[pl.DataFrame, dict[str, Any]]:
    """The profiles frame and the ``calibration`` metadata of one calibration run (module docstring)."""
    from shepherd.core.profiles import fit_linear

    size, exec_ms = raw["size"], raw["exec_us"] / 1000.0
    idle = raw["after_idle"]  # the schedule's condition (its idle gaps are ≥ 0.5·ℓ(b), far above IDLE_GAP_US)
    rows = []
    for b in range(1, int(size.max()) + 1):
        sel = size == b
        xs = exec_ms[sel]
        if len(xs) < 2:
            raise UserError(f"calibration of '{model}' has fewer than 2 batches of size {b}")
        rows.append({"model": model, "hardware": HARDWARE, "batch": b, "latency_ms": float(xs.mean()),
                     "median_ms": float(np.median(xs)), "cv": float(xs.std(ddof=1) / xs.mean()),
                     "samples_ms": np.sort(exec_ms[sel & ~idle]).tolist(),
                     "idle_samples_ms": np.sort(exec_ms[sel & idle]).tolist()})
    means = np.array([r["latency_ms"] for r in rows])
    fit = fit_linear(np.arange(1, len(rows) + 1, dtype=float), means)
    frame = pl.DataFrame(rows, schema={"model": pl.String, "hardware": pl.String, "batch": pl.Int32,
                                       "latency_ms": pl.Float64, "median_ms": pl.Float64, "cv": pl.Float64,
                                       "samples_ms": pl.List(pl.Float64), "idle_samples_ms": pl.List(pl.Float64)})
    frame = frame.with_columns(alpha_ms=pl.lit(fit.alpha), beta_ms=pl.lit(fit.beta), r2=pl.lit(fit.r2),
                               source=pl.lit(SOURCE), exit_points=pl.lit(max(layers - 1, 1), dtype=pl.Int32))
    busy = ~idle
    turn = (raw["dispatch_us"] + raw["report_us"])[busy] / 1000.0
    hop = raw["hop_us"] / 1000.0
    meta = {
        "model": model, "seed": seed, "batches": int(len(size)), "repeats": int(len(size) // int(size.max())),
        "decision_delay_ms": {"mean": float(turn.mean()) if len(turn) else math.nan, "median": _q(turn, 50),
                              "p99": _q(turn, 99)},
        "dispatch_ms": {"mean": float(raw["dispatch_us"].mean() / 1000.0), "p99": _q(raw["dispatch_us"] / 1000, 99)},
        "hop_ms": {"mean": float(hop.mean()) if len(hop) else math.nan, "median": _q(hop, 50), "p99": _q(hop, 99)},
        "core_wait_share": _core_wait(raw),
        "busy_over_idle": _busy_over_idle(size, exec_ms, idle),
        "non_monotone": non_monotone([0.0, *means.tolist()]),
        "trace": {"seed_stream": ["seed", "0xCA1B"], "rate_rps": raw["trace_rate_rps"], "duration_s": raw["trace_s"],
                  "requests": raw["trace_requests"], "note": "the calibration's own Poisson trace; never a "
                  "validated run's"},
        "worker_core": raw["worker_core"], "engine_core": raw["engine_core"], "shared_cores": raw["shared_cores"],
        "layers": layers,
    }
    return frame, meta


def _core_wait(raw: dict[str, Any]) -> float:
    """Share of the batches' wall time the pinned worker waited for its core (1 − CPU / wall)."""
    cpu, wall = raw["cpu_us"].sum(), raw["exec_us"].sum()
    return float(1.0 - cpu / wall) if wall > 0 else math.nan


def _busy_over_idle(size: np.ndarray, exec_ms: np.ndarray, idle: np.ndarray) -> float:
    """Mean over sizes of (mean back-to-back duration) / (mean after-idle duration)."""
    ratios = [exec_ms[(size == b) & ~idle].mean() / exec_ms[(size == b) & idle].mean()
              for b in np.unique(size) if ((size == b) & ~idle).any() and ((size == b) & idle).any()]
    return float(np.mean(ratios)) if ratios else math.nan


def calibrate(model: str, max_batch: int, repeats: int, seed: int, rate_rps: float | None = None,
              progress: Any = None) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Run the calibration harness for ``model`` and summarise it (module docstring)."""
    from shepherd.core.engine.live.calibrate import run_calibration
    from shepherd.core.measure import zoo

    net, _ = zoo.build(model)
    raw = run_calibration(model, max_batch, repeats, seed, rate_rps=rate_rps, progress=progress)
    frame, meta = summarize(model, raw, len(zoo.layers(net)), seed)
    meta["load_average"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return frame, meta


def execution_model(profiles: pl.DataFrame, mode: str = "measured", seed: int = 0, scale: float = 1.0):
    """The :class:`~shepherd.core.engine.execution.ExecutionModel` of a calibrated profiles frame."""
    from shepherd.core.engine.execution import ExecutionModel

    if mode == "mean":
        return ExecutionModel("mean", {}, scale, seed)
    if "samples_ms" not in profiles.columns:
        raise UserError("--exec-time measured needs a calibrated profile (shepherd calibrate): these profiles "
                        "have no measured samples")
    busy, idle = {}, {}
    for m, b, xs, ys in profiles.select("model", "batch", "samples_ms", "idle_samples_ms").iter_rows():
        busy[(m, int(b))] = tuple(xs or ys or ())
        idle[(m, int(b))] = tuple(ys or xs or ())
    return ExecutionModel("measured", busy, scale, seed, idle_samples_ms=idle, idle_gap_us=IDLE_GAP_US)


def decision_overhead(meta: dict[str, Any]):
    """The simulator's per-decision delay from a calibration: each decision takes effect one measured decision
    delay (dispatch + report hop, mean) after it is made; nothing is shed (the live engine sheds nothing)."""
    from shepherd.core.engine.overhead import OverheadConfig

    delay = meta["decision_delay_ms"]["mean"]
    if not math.isfinite(delay):
        raise UserError("the calibration measured no decision delay (none of its batches ran back to back: "
                        "calibrate again with more --repeats)")
    return OverheadConfig(mode="model", base_us=max(delay, 0.0) * 1000.0, per_worker_us=0.0, max_lag_us=math.inf)


def calibration_of(path: Any) -> dict[str, Any] | None:
    """The calibration metadata a profiles artifact written by ``shepherd calibrate`` carries (None for
    another profile: a Table 4 or ``profile --measure`` one)."""
    from shepherd.core.artifacts import read_artifact

    return read_artifact(path, "profiles").extra.get("calibration") if path is not None else None


def calibrated_overhead(path: Any):
    """``--overhead calibrated``: the per-decision delay measured by the calibration of the profiles at
    ``path`` (:func:`decision_overhead`); a one-line error for profiles without one."""
    meta = calibration_of(path)
    if not meta:
        raise UserError("--overhead calibrated needs a calibrated profiles artifact (--profiles from shepherd "
                        "calibrate): these profiles carry no measured decision delay")
    return decision_overhead(meta)


def drift(a: pl.DataFrame, b: pl.DataFrame, meta_a: dict[str, Any] | None = None,
          meta_b: dict[str, Any] | None = None) -> pl.DataFrame:
    """Per model × size: the second calibration's mean and CV against the first's (relative change, %)."""
    key = ["model", "batch"]
    j = a.select(*key, "latency_ms", "cv").join(b.select(*key, "latency_ms", "cv"), on=key, suffix="_2")
    out = j.with_columns(mean_change_pct=(pl.col("latency_ms_2") / pl.col("latency_ms") - 1) * 100,
                         cv_change=(pl.col("cv_2") - pl.col("cv"))).sort(key)
    if meta_a and meta_b:
        d1, d2 = meta_a["decision_delay_ms"]["mean"], meta_b["decision_delay_ms"]["mean"]
        out = out.with_columns(decision_delay_change_ms=pl.lit(d2 - d1))
    return out


#: the speed probes' own stream beside the calibration's (:func:`speed_probe`)
PROBE_STREAM = 0x9B0E


def probe_ratios(profiles: pl.DataFrame, model: str, raw: dict[str, Any]) -> np.ndarray:
    """Each probe batch's duration over the calibrated mean ℓ(b) of its size: the machine's speed then, relative
    to the calibration (1.10 = batches 10 % slower), one ratio per batch."""
    mean = dict(profiles.filter(pl.col("model") == model).select("batch", "latency_ms").iter_rows())
    missing = sorted(set(raw["size"].tolist()) - set(mean))
    if missing:
        raise UserError(f"the calibration of '{model}' has no size {missing[0]} that the speed probe measured")
    ref = np.array([mean[int(b)] for b in raw["size"]], float)
    return raw["exec_us"] / 1000.0 / ref


def speed_probe(model: str, profiles: pl.DataFrame, max_batch: int, repeats: int, seed: int,
                phase: int) -> dict[str, Any]:
    """A short calibration run just before (``phase`` 0) or just after (1) a validated run: every size
    1…``max_batch``, ``repeats`` times each, in the same live harness and under the same serving conditions as
    :func:`calibrate`, on a stream of its own (``[seed, SALT, PROBE_STREAM, phase]``: never the validated trace,
    never the calibration's). Returns the per-batch speed ratios against ``profiles`` (:func:`probe_ratios`),
    their median, and the worker's core wait over the probe.

    Why (issue 40): on a VM the same worker's batches run at 0.89–1.14× a calibration done minutes earlier, with
    no core wait; two probes bracketing the run measure the machine's speed and spread *at the time of the run*,
    from runs apart from it. :func:`tracked_execution` turns them into the simulator's execution model."""
    from shepherd.core.engine.live.calibrate import run_calibration

    raw = run_calibration(model, max_batch, repeats, seed, stream=(PROBE_STREAM, phase))
    ratios = probe_ratios(profiles, model, raw)
    return {"phase": phase, "ratios": ratios.tolist(), "median": float(np.median(ratios)),
            "core_wait_share": _core_wait(raw), "batches": int(len(ratios))}


def tracked_execution(profiles: pl.DataFrame, ratios: list[float] | np.ndarray, seed: int = 0):
    """The execution model of a run bracketed by speed probes: a batch of size b runs ℓ(b) × a ratio drawn from
    the probes' pooled per-batch ratios (:func:`speed_probe`) — the calibration's *shape* (its per-size means)
    at the probes' *speed and spread*. One pool for both conditions (back to back, after idle): the live runs'
    batch times show no dependence on the idle gap beyond the machine's drift (docs/VALIDATION.md)."""
    from shepherd.core.engine.execution import ExecutionModel

    rs = np.sort(np.asarray(ratios, float))
    if not len(rs) or not np.isfinite(rs).all() or (rs <= 0).any():
        raise UserError("speed probes gave no usable ratios (none measured, or a non-positive one)")
    samples = {(m, int(b)): tuple((rs * lat).tolist())
               for m, b, lat in profiles.select("model", "batch", "latency_ms").iter_rows()}
    return ExecutionModel("measured", samples, 1.0, seed, idle_samples_ms=samples, idle_gap_us=IDLE_GAP_US)
