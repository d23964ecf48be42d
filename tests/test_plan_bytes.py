"""Every planner's plan is byte-identical across two runs (issue 33 item 7).

Wall-clock values (a solver's time, PPipe's knapsack time, Symphony's start
partition time) live in ``plan.run.json``, never in the hashed Parquet: a
plan's bytes feed every later simulation's input hash, so a timing inside
them would make every downstream cell look new.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from shepherd.core.artifacts import WALL_CLOCK_KEYS, make_provenance, read_artifact, write_artifact
from shepherd.solvers.planners import PLANNERS

from conftest import PPIPE_DATA, needs_ppipe

PPIPE_MODELS = ["fcn-d6_r101-d16_4xb2-40k_cityscapes-512x1024", "repvgg-b3"]
GPU_PLANNERS = ["herd", "nexus", "single-group", "offline-optimal"]


def _trace(tmp_path, models: list[str], n: int, span_us: int, slo_us: int):
    rng = np.random.default_rng(5)
    arr = np.sort(rng.integers(0, span_us, n)).astype(np.int64)
    stream = rng.integers(0, 2 * len(models), n).astype(np.int32)
    frame = pl.DataFrame({"arrival_us": arr, "stream": stream, "model": [models[s % len(models)] for s in stream],
                          "slo_us": np.full(n, slo_us, np.int64)}).with_columns(
        deadline_us=pl.col("arrival_us") + pl.col("slo_us"))
    path = tmp_path / "trace.parquet"
    write_artifact(frame, path, "trace", make_provenance({}, 0))
    return path


def _twice(cli, tmp_path, *args, kind: str = "plan"):
    outs = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    for out in outs:
        r = cli("plan", *map(str, args), "-o", out)
        assert r.code == 0, r.err
    return [o.read_bytes() for o in outs], read_artifact(outs[0], kind)


def _no_wall_clock(extra) -> bool:
    if isinstance(extra, dict):
        return not (WALL_CLOCK_KEYS & set(extra)) and all(_no_wall_clock(v) for v in extra.values())
    if isinstance(extra, list):
        return all(_no_wall_clock(v) for v in extra)
    return True


def test_every_planner_is_covered():
    """A planner added to the registry must be added here too (or this test says which is missing)."""
    assert set(PLANNERS) == set(GPU_PLANNERS) | {"ppipe", "np", "dart-r", "symphony-partition"}


@pytest.mark.parametrize("planner", GPU_PLANNERS)
def test_gpu_planner_bytes_identical(cli, tmp_path, planner):
    small = planner == "offline-optimal"  # an exact ZILP over requests: ≤ 200 of them
    trace = _trace(tmp_path, ["ResNet18", "ResNet50", "DenseNet121", "GoogLeNet"], 40 if small else 400,
                   200_000 if small else 2_000_000, 100_000)
    gpus = "2" if small else "8"
    (a, b), art = _twice(cli, tmp_path, "--trace", trace, "--planner", planner, "--gpus", gpus)
    assert a == b
    assert _no_wall_clock(art.extra)


def test_symphony_partition_bytes_identical(cli, tmp_path):
    """The start partition's time (``start_s``) was inside the hashed metadata."""
    trace = _trace(tmp_path, ["DenseNet121", "EfficientNet", "InceptionV3", "MobileNet", "ResNet50", "VGG16"],
                   1200, 10_000_000, 100_000)
    profiles = tmp_path / "mem.parquet"
    assert cli("profile", "--table", "symphony-memory", "-o", profiles).code == 0
    (a, b), art = _twice(cli, tmp_path, "--trace", trace, "--planner", "symphony-partition", "--profiles", profiles,
                         "--gpus", "8", "--partitions", "3", "--gpu-memory-mb", "11264", "--time-limit", "5")
    if art.extra["status"] != "optimal":
        pytest.skip(f"the partition MILP stopped {art.extra['status']} within its limit: its plan may differ")
    assert a == b
    assert _no_wall_clock(art.extra)


@needs_ppipe
@pytest.mark.parametrize("planner", ["ppipe", "np", "dart-r"])
def test_ppipe_planner_bytes_identical(cli, tmp_path, planner):
    """PPipe's knapsack warm start's time (``knapsack_s``) was inside the hashed metadata."""
    from shepherd.core.pipelines import blocks
    from shepherd.traces.arrivals import poisson
    from shepherd.traces.synthetic import assemble

    profs = blocks.read_ppipe_dir(PPIPE_DATA, PPIPE_MODELS)
    bp = tmp_path / "blocks.parquet"
    write_artifact(blocks.to_frame(profs), bp, "block_profiles", make_provenance({}, 0))
    rng = np.random.default_rng(0)
    trace = assemble([poisson(rng, 100.0, 1_000_000), poisson(rng, 300.0, 1_000_000)], PPIPE_MODELS,
                     [p.slo_us() for p in profs])
    tp = tmp_path / "trace.parquet"
    write_artifact(trace, tp, "trace", make_provenance({}, 0))
    (a, b), art = _twice(cli, tmp_path, "--trace", tp, "--planner", planner, "--profiles", bp, "--cluster", "HC1-S",
                         kind="pipeline_plan")
    assert a == b
    assert _no_wall_clock(art.extra)
