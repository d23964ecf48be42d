"""Per-layer latency profiles (artifact kind ``layer_profiles``) and the built-in ones (Accordion §4.1).

The seed's simulator reads "a database of execution times for individual
neural network layers" measured on one EP (8 Alder Lake P-cores, §4.1). The
database is not published; only Table 1 (1-EP latency, speedups on 2/4/8
EPs) is. The built-in per-layer profile of each model spreads Table 1's
1-EP latency over the model's layers in proportion to their multiply-adds
(VGG16: 13 convolutions + 3 fully connected layers; ResNet50 / ResNet152:
stem, one row per bottleneck block, classifier), per inference instance.

A ``layer_profiles`` frame has one row per model × hardware × batch × layer
(``layer`` is the 0-based execution order); ``shepherd profile --measure
--per-layer`` writes the same kind from real PyTorch runs.
"""

from __future__ import annotations

import polars as pl

from shepherd.core.errors import UserError

HARDWARE = "AlderLake"

# relative multiply-adds per layer (GMAC at 224×224), in execution order
_VGG16 = [0.087, 1.85, 0.925, 1.85, 0.925, 1.85, 1.85, 0.925, 1.85, 1.85, 0.462, 0.462, 0.462, 0.103, 0.017, 0.004]


def _resnet(blocks: tuple[int, int, int, int]) -> list[float]:
    """Stem, bottleneck blocks (the first of a stage carries the projection), classifier."""
    per = [0.231, 0.218, 0.218, 0.205]  # GMAC of a bottleneck block in each stage
    first = [0.245, 0.311, 0.311, 0.311]  # first block: downsampling + projection shortcut
    out = [0.118]
    for s, n in enumerate(blocks):
        out += [first[s]] + [per[s]] * (n - 1)
    return out + [0.002]


_RELATIVE = {"VGG16": _VGG16, "ResNet50": _resnet((3, 4, 6, 3)), "ResNet152": _resnet((3, 8, 36, 3))}


def builtin_layer_profiles(one_ep_ms: dict[str, float]) -> pl.DataFrame:
    """Per-instance layer latencies on one EP whose sum is each model's Table 1 1-EP latency."""
    rows = []
    for model, rel in _RELATIVE.items():
        total = sum(rel)
        for i, r in enumerate(rel):
            rows.append((model, HARDWARE, i, f"{model.lower()}.{i}", 1, one_ep_ms[model] * r / total))
    return layer_frame(rows)


def layer_frame(rows: list[tuple]) -> pl.DataFrame:
    """A ``layer_profiles`` frame from (model, hardware, layer, name, batch, latency_ms) rows."""
    return pl.DataFrame(rows, schema={"model": pl.String, "hardware": pl.String, "layer": pl.Int32,
                                      "name": pl.String, "batch": pl.Int32, "latency_ms": pl.Float64},
                        orient="row")


def layers_of(frame: pl.DataFrame, model: str, batch: int | None = None) -> list[float]:
    """Per-instance layer latencies (ms) of ``model`` in execution order.

    A measured profile holds several batch sizes: the per-instance latency is
    taken at ``batch`` (default: the largest measured, the steady state of a
    pipeline stage) divided by that batch.
    """
    sub = frame.filter(pl.col("model") == model)
    if sub.height == 0:
        known = ", ".join(sorted(frame["model"].unique().to_list()))
        raise UserError(f"no layer profile for model '{model}' (profiled: {known})")
    b = int(sub["batch"].max()) if batch is None else batch
    sub = sub.filter(pl.col("batch") == b).sort("layer")
    if sub.height == 0:
        raise UserError(f"layer profile of '{model}' has no batch {b}")
    return [x / b for x in sub["latency_ms"].to_list()]


def check_layer_profiles(df: pl.DataFrame) -> str | None:
    """Semantic check of the ``layer_profiles`` kind."""
    if df.height == 0:
        return "layer profiles artifact has no rows"
    if (df["batch"] < 1).any():
        return "column 'batch' must be ≥ 1"
    if (df["layer"] < 0).any():
        return "column 'layer' must be ≥ 0 (execution order)"
    if (df["latency_ms"] <= 0).any():
        return "column 'latency_ms' must be positive"
    return None
