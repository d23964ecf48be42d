"""From timings to artifacts: whole-model α, β, R² (kind ``profiles``) or per-layer rows (``layer_profiles``)."""

from __future__ import annotations

import polars as pl

from shepherd.core import profiles as prof
from shepherd.core.bounds import check_bound
from shepherd.core.errors import UserError
from shepherd.core.measure.timing import environment, measure_model, setup

DEFAULT_BATCHES = (1, 2, 4, 8)


def parse_batches(text: str | None) -> list[int]:
    if not text:
        return list(DEFAULT_BATCHES)
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--batch takes comma-separated integers, got '{text}'") from None
    if not out or min(out) < 1:
        raise UserError(f"--batch sizes must be ≥ 1, got '{text}'")
    check_bound("measure_batch", max(out), "--batch sizes")
    return sorted(set(out))


def measure(models: list[str], device: str, per_layer: bool, threads: int | None, batches: list[int],
            warmup: int = 2, repeats: int = 5) -> tuple[str, pl.DataFrame, dict]:
    """(kind, frame, environment) of a measurement run."""
    if repeats < 1 or warmup < 0:
        raise UserError("--repeats must be ≥ 1 and --warmup ≥ 0")
    torch = setup(device, threads)
    env = environment(torch, device)
    frames = [measure_model(m, batches, device, per_layer, warmup, repeats) for m in models]
    raw = pl.concat(frames)
    source = f"measured:torch-{torch.__version__}-{device}"
    if per_layer:
        return "layer_profiles", raw.with_columns(pl.lit(source).alias("source")), env
    if len(batches) < 2:
        raise UserError("a whole-model α, β fit needs at least two --batch sizes")
    fit = prof.fit_measurements(raw.select("model", "hardware", "batch", "latency_ms"), source=source)
    return "profiles", fit, env
