"""The simulator against real execution: live vs simulated metrics, their relative error, and the residual's causes.

``shepherd validate`` runs one trace live (:mod:`shepherd.core.engine.live`)
and simulated, with the same policy objects and the same measured profile, and
compares per policy: SLO attainment, goodput, p50/p90/p99 latency of served
requests, mean batch size and worker utilisation (:func:`metrics`), with the
relative error ``(sim − live) / live`` (:func:`compare`). The residual's causes
are measured on the live run (:func:`residuals`):

* *dispatch overhead* — a batch's measured start minus the start the policy
  planned when it dispatched it (pipes, the worker's wake-up), and the
  frontend hop: when the engine received a request minus its trace arrival;
* *execution variance* — the coefficient of variation of measured batch
  durations per batch size, and their mean ratio to the profile's latency,
  split into the worker's CPU time over the batch against the profile
  (``exec_cpu_ratio``: the model itself ran slower or faster) and the share of
  the batch's wall time the pinned worker spent waiting for its core
  (``core_wait_share``: other processes on the same core);
* *scheduler decision time* — the policy's own handler time per event.

:func:`measured_overhead` turns the first into the simulator's overhead model
(``--overhead measured``): each decision costs the mean dispatch delay plus the
mean frontend hop (one number, nothing fitted per run).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import polars as pl

from shepherd.core.engine.overhead import OverheadConfig
from shepherd.core.engine.result import SimulationResult

if TYPE_CHECKING:  # pragma: no cover
    from shepherd.core.engine.execution import ExecutionModel

METRICS = ("slo_attainment", "goodput_rps", "p50_ms", "p90_ms", "p99_ms", "mean_batch", "utilization")


def latencies_ms(result: SimulationResult) -> np.ndarray:
    """Served requests' latency (finish − trace arrival), ms."""
    r = result.recorder
    done = r.r_finish >= 0
    return (r.r_finish[done] - result.engine.arrival[done]) / 1000.0


def metrics(result: SimulationResult) -> dict[str, float]:
    """The compared metrics of one run (module docstring); attainment over all requests."""
    r, e = result.recorder, result.engine
    n = len(e.arrival)
    good = int((r.r_outcome == 1).sum()) if n else 0
    span_s = max((int(e.arrival.max()) - int(e.arrival.min())) / 1e6, 1e-9) if n else 1e-9
    lat = latencies_ms(result)
    b = r.batch_columns()
    done = ~b["preempted"].astype(bool)
    ends = b["end"][done]
    wall = (max(int(ends.max()), int(e.arrival.max())) - int(e.arrival.min())) if len(ends) else 0
    busy = float(np.sum(r.w_busy))
    workers = len(e.res.w_group)
    pct = (lambda q: float(np.percentile(lat, q))) if len(lat) else (lambda q: math.nan)
    return {"slo_attainment": good / n if n else math.nan, "goodput_rps": good / span_s,
            "p50_ms": pct(50), "p90_ms": pct(90), "p99_ms": pct(99),
            "mean_batch": float(b["size"][done].mean()) if done.any() else math.nan,
            "utilization": busy / (workers * wall) if wall > 0 else math.nan}


def compare(live: dict[str, float], sim: dict[str, float]) -> list[dict[str, Any]]:
    """One row per metric: live, simulated, relative error (sim − live) / live (None where live is 0)."""
    rows = []
    for k in METRICS:
        a, s = live[k], sim[k]
        err = (s - a) / a if a and not math.isnan(a) and not math.isnan(s) else None
        rows.append({"metric": k, "live": a, "sim": s, "rel_err": err})
    return rows


def residuals(live: SimulationResult) -> dict[str, Any]:
    """Measured causes of the live-vs-simulated gap (module docstring)."""
    e = live.engine
    res, rec = e.res, e.rec
    b = rec.batch_columns()
    planned = np.array(res.planned, np.int64).reshape(-1, 2)
    completed = np.array(res.reported, np.int64)
    dispatch = (b["start"][completed] - planned[completed, 0]) / 1000.0
    got = e.received >= 0
    hop = (e.received[got] - e.arrival[got]) / 1000.0
    dur = (b["end"] - b["start"])[completed] / 1000.0
    sizes = b["size"][completed]
    models = b["model"][completed]
    pred = np.array([res.lat[0][m][s] for m, s in zip(models, sizes)], float) / 1000.0 if len(sizes) else np.empty(0)
    per_size = []
    for s in np.unique(sizes):
        d, p = dur[sizes == s], pred[sizes == s]
        per_size.append({"size": int(s), "batches": int(len(d)), "mean_ms": float(d.mean()),
                         "cv": float(d.std() / d.mean()) if d.mean() > 0 else math.nan,
                         "profile_ms": float(p.mean()), "ratio": float(d.mean() / p.mean()) if p.mean() else math.nan})
    cpu = np.array(res.cpu_us, float) / 1000.0
    t = e.timing_table()
    return {"exec_cpu_ratio": float(cpu.sum() / pred.sum()) if pred.sum() else math.nan,
            "core_wait_share": float(1 - cpu.sum() / dur.sum()) if dur.sum() else math.nan,
            "dispatch_ms_mean": float(dispatch.mean()) if len(dispatch) else math.nan,
            "dispatch_ms_p99": float(np.percentile(dispatch, 99)) if len(dispatch) else math.nan,
            "hop_ms_mean": float(hop.mean()) if len(hop) else math.nan,
            "hop_ms_p99": float(np.percentile(hop, 99)) if len(hop) else math.nan,
            "exec_ratio": float(dur.sum() / pred.sum()) if pred.sum() else math.nan,
            "exec_cv": per_size,
            "decision_us_mean": float(t["ns"].mean() / 1000) if len(t["ns"]) else math.nan,
            "decision_us_p99": float(np.percentile(t["ns"], 99) / 1000) if len(t["ns"]) else math.nan,
            "failures": live.extra.get("live", {}).get("failures", [])}


def measured_overhead(res: dict[str, Any]) -> OverheadConfig:
    """``--overhead measured``: each decision costs the mean dispatch delay plus the mean frontend hop."""
    cost = sum(x for x in (res["dispatch_ms_mean"], res["hop_ms_mean"]) if not math.isnan(x)) * 1000.0
    return OverheadConfig(mode="model", base_us=max(cost, 0.0), per_worker_us=0.0, max_lag_us=math.inf)


def exec_frame(res: dict[str, Any]) -> pl.DataFrame:
    """Execution variance per batch size as a table."""
    return pl.DataFrame(res["exec_cv"], schema={"size": pl.Int32, "batches": pl.Int64, "mean_ms": pl.Float64,
                                               "cv": pl.Float64, "profile_ms": pl.Float64, "ratio": pl.Float64})


def capacity_rps(profiles: pl.DataFrame, model: str, workers: int, max_batch: int) -> float:
    """The profile's best throughput: ``workers · B / ℓ(B)`` over batch sizes B ≤ ``max_batch``."""
    from shepherd.core.profiles import latency_table_us

    lat = latency_table_us(profiles, model, None, max_batch)
    return workers * max(b / (lat[b] / 1e6) for b in range(1, max_batch + 1))


def validation_trace(model: str, rps: float, duration_s: float, slo_ms: float, seed: int) -> pl.DataFrame:
    """The validation trace: one Poisson stream of ``model`` from ``default_rng(seed)`` (calibration draws from
    its own stream, :data:`shepherd.core.engine.live.calibrate.SALT`, so the two never coincide)."""
    from shepherd.traces.synthetic import SyntheticSpec, generate

    return generate(SyntheticSpec("poisson", rps, duration_s, (model,), slo_ms=slo_ms), np.random.default_rng(seed))


def live_execution(live: SimulationResult, fallback: "ExecutionModel", scale: float = 1.0) -> "ExecutionModel":
    """The live run's own batch durations as an execution model: per model × size, the measured durations of
    its completed batches, split like calibration's samples by whether the worker was busy just before (gap to
    its previous batch ≤ :data:`~shepherd.core.calibration.IDLE_GAP_US`). Sizes the live run never ran keep
    ``fallback``'s (calibrated) samples. Simulating with it replays the live run's *execution* while the
    policy decides afresh: the rest of the gap is scheduling (:func:`split`)."""
    from shepherd.core.calibration import IDLE_GAP_US

    b = live.recorder.batch_columns()
    order = np.lexsort((b["start"], b["worker"]))
    busy: dict[tuple[str, int], list[float]] = {}
    idle: dict[tuple[str, int], list[float]] = {}
    prev_w, prev_end = -1, 0
    for i in order:
        w, start, end = int(b["worker"][i]), int(b["start"][i]), int(b["end"][i])
        gap = start - (prev_end if w == prev_w else 0)
        prev_w, prev_end = w, end
        if b["preempted"][i]:
            continue
        key = (live.models[int(b["model"][i])], int(b["size"][i]))
        (idle if gap > IDLE_GAP_US else busy).setdefault(key, []).append((end - start) / 1000.0)
    merged_busy = dict(fallback.samples_ms)
    merged_idle = dict(fallback.idle_samples_ms or fallback.samples_ms)
    for key in set(busy) | set(idle):
        merged_busy[key] = tuple(busy.get(key) or idle[key])
        merged_idle[key] = tuple(idle.get(key) or busy[key])
    return dataclasses.replace(fallback, mode="measured", samples_ms=merged_busy, idle_samples_ms=merged_idle,
                               scale=scale)


def run_pair(trace: pl.DataFrame, profiles: pl.DataFrame, policy: str, *, workers: int = 1, max_batch: int = 8,
             seed: int = 0, overhead: str = "none", drain_s: float = 10.0,
             kill_at: tuple[int, float] | None = None,
             execution: "ExecutionModel | Callable[[], ExecutionModel] | None" = None,
             decision: OverheadConfig | None = None, split: bool = False) -> dict[str, Any]:
    """One policy live and simulated on the same trace and profile (module docstring).

    Returns ``live`` and ``sim`` results, their ``compare`` rows, the live run's ``residuals``. The simulation
    draws batch times from ``execution`` (calibration's samples; None: the profile's latency; a function: called
    once the live run is done, for a model that takes a speed probe run just after it) and charges
    ``decision`` per decision (calibration's delay; None: free). With ``split`` also ``sim_live_exec`` (the
    simulation with the live run's own batch times, :func:`live_execution`) and the sensitivity of attainment
    to the batch time (:func:`sensitivity`). ``overhead="measured"`` also simulates with the *validated* run's
    own dispatch delay (``sim_measured``) — a diagnostic counterfactual, never the prediction.
    """
    from shepherd.core.engine import EngineConfig, simulate
    from shepherd.core.engine.live import run_live

    live = run_live(trace, profiles, policy, workers=workers, seed=seed, max_batch=max_batch, drain_s=drain_s,
                    kill_at=kill_at)
    if callable(execution):
        execution = execution()
    eng = EngineConfig(path="reference")
    ovh = decision if decision is not None else OverheadConfig(mode="none")

    def sim_with(execution_model: Any, cost: OverheadConfig = ovh) -> SimulationResult:
        return simulate(trace, profiles, policy, gpus=workers, seed=seed, max_batch=max_batch, overhead=cost,
                        engine=eng, execution=execution_model)

    sim = sim_with(execution)
    lm = metrics(live)
    out: dict[str, Any] = {"live": live, "sim": sim, "rows": compare(lm, metrics(sim)), "residuals": residuals(live)}
    if split:
        from shepherd.core.engine.execution import ExecutionModel

        base = execution if execution is not None else ExecutionModel("mean", seed=seed)
        replayed = sim_with(live_execution(live, base))
        out["sim_live_exec"], out["rows_live_exec"] = replayed, compare(lm, metrics(replayed))
        out["sensitivity"] = sensitivity(lambda scale: metrics(sim_with(dataclasses.replace(base, scale=scale))))
    if overhead == "measured":
        sm = sim_with(execution, measured_overhead(out["residuals"]))
        out["sim_measured"], out["rows_measured"] = sm, compare(lm, metrics(sm))
    return out


SENSITIVITY_STEP = 0.02  #: batch times scaled by 1 ± this for the sensitivity's central difference


def sensitivity(run: Any) -> dict[str, float]:
    """Change of attainment (points) and p99 (%) per 1 % longer batches: a central difference over batch times
    scaled by 1 ± :data:`SENSITIVITY_STEP` (``run(scale)`` → metrics). It says how much a small error in the
    execution model moves the result — beside each validation claim, so an error is read against it."""
    hi, lo = run(1 + SENSITIVITY_STEP), run(1 - SENSITIVITY_STEP)
    steps = 2 * SENSITIVITY_STEP * 100
    p99 = (hi["p99_ms"] - lo["p99_ms"]) / steps / ((hi["p99_ms"] + lo["p99_ms"]) / 2) * 100 \
        if hi["p99_ms"] + lo["p99_ms"] > 0 else math.nan
    return {"attainment_pts_per_pct": (hi["slo_attainment"] - lo["slo_attainment"]) * 100 / steps,
            "p99_pct_per_pct": p99}
