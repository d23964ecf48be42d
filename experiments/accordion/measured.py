"""The Accordion figures once more, on a per-layer profile measured on this machine (Accordion §4.1).

The seed built its layer database by running each layer on one EP of an
Alder Lake; we do the same here with PyTorch on this machine's CPU —
``shepherd profile --measure VGG16,ResNet50,ResNet152 --per-layer
--threads 1 --batch 1`` (one torch thread plays one EP; batch 1 because an
Accordion pipeline streams its instances one at a time; 1 warm-up, 3
repeats, median), through :func:`shepherd.core.measure.artifact.measure`.

* **Cached.** :meth:`OnMeasured.prepare` measures once and writes the
  ``layer_profiles`` artifact to ``RESULTS/inputs/accordion-layers-measured.parquet``
  (device, thread count, CPU model and library versions in its provenance);
  a later ``reproduce`` reads it. Delete that file to measure again.
* **Carried in the cell.** The per-instance layer latencies and the CPU
  model are cell parameters (``layers``, ``cpu``), so a cell's content key
  changes with the profile, and a worker (a local process or a Ray task)
  needs no file.
* **Raw.** A measured profile is used as measured: no Table 1 calibration
  (:mod:`shepherd.core.accordion.configs`). Stream rates and SLO targets
  follow from its 1-EP latencies (:func:`.common.simulate_stream`); §2.1's
  times scale with its VGG16 1-EP latency (:mod:`.fig01_motivation`).
* **Without torch** the measured experiments have no cells and
  ``reproduce`` says so in one line.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from shepherd.core.accordion.layers import layer_frame, layers_of
from shepherd.core.artifacts import make_provenance, read_artifact, write_artifact
from shepherd.core.errors import UserError
from shepherd.experiments.base import Cell

MODELS = ("VGG16", "ResNet50", "ResNet152")
CACHE = Path("inputs") / "accordion-layers-measured.parquet"
SETTINGS = {"threads": 1, "batches": [1], "warmup": 1, "repeats": 3}


def measure_or_read(results_dir: Path) -> tuple[pl.DataFrame, str]:
    """(layer_profiles frame, CPU model): the cached measurement, or a new one written to the cache."""
    path = results_dir / CACHE
    if path.exists():
        art = read_artifact(path, "layer_profiles")
        return art.frame, str(art.provenance.get("config", {}).get("environment", {}).get("cpu", "unknown CPU"))
    from shepherd.core.measure.artifact import measure

    kind, frame, env = measure(list(MODELS), "cpu", True, SETTINGS["threads"], SETTINGS["batches"],
                               SETTINGS["warmup"], SETTINGS["repeats"])
    config = {"measure": list(MODELS), "per_layer": True, **SETTINGS, "environment": env}
    write_artifact(frame, path, kind, make_provenance(config, None, [], argv=[
        "shepherd", "profile", "--measure", ",".join(MODELS), "--per-layer", "--threads", "1", "--batch", "1",
        "--warmup", "1", "--repeats", "3"]))
    return frame, str(env["cpu"])


def as_param(frame: pl.DataFrame) -> dict[str, list[float]]:
    """model → per-instance layer latencies (ms), the JSON-able form a cell carries."""
    return {m: layers_of(frame, m) for m in MODELS}


def frame_of(layers: dict[str, list[float]], cpu: str) -> pl.DataFrame:
    """The ``layer_profiles`` frame of a cell's ``layers`` parameter (hardware: the measured CPU)."""
    hw = f"measured: {cpu}"
    return layer_frame([(m, hw, i, f"{m.lower()}.{i}", 1, float(x)) for m, xs in sorted(layers.items())
                        for i, x in enumerate(xs)])


class OnMeasured:
    """Mixin before an Accordion experiment: the same grid, figures and rows on the measured profile."""

    measured: tuple[dict[str, list[float]], str] | None = None

    def prepare(self, results_dir: Path, scale) -> str | None:  # noqa: ANN001 - a Scale
        try:
            frame, cpu = measure_or_read(results_dir)
        except UserError as exc:  # torch missing: the built-in figures still run
            return f"{self.name}: skipped ({exc})"
        self.measured = (as_param(frame), cpu)
        return None

    def cells(self, scale):  # noqa: ANN001, ANN201
        if self.measured is None:
            return []
        layers, cpu = self.measured
        return [Cell(self.name, {**cell.params, "layers": layers, "cpu": cpu}) for cell in super().cells(scale)]

    def suffix(self, results: pl.DataFrame) -> str:
        cpu = results["cpu"][0] if "cpu" in results.columns and results.height else "this machine"
        return f" — on a profile measured on {cpu} (1 thread per EP)"
