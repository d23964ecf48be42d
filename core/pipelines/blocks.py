"""Per-block profiles for pool-based pipelines (PPipe §5.1–§5.3, Appendix A.2 Table 5).

A DNN is pre-partitioned into ``B`` blocks (§5.2; ``B = 10``, 9 for five
detectors in the authors' data). A :class:`BlockProfile` holds, per GPU type
and MPS level ``k`` (a 1/k share of the GPU, §5.3), the latency ``L[k,v,b,i]``
of block ``i`` at batch size ``b`` in integer µs, the bytes per sample ``S_i``
crossing the boundary after block ``i`` (FP16 activations, §6), and the
whole-model L4 batch-1 latency that defines the SLO (§7.1 "Setup": SLO =
5 × the latency on the fastest GPU, L4).

Derived quantities (the data README's formulas, which follow the paper):

* partition latency ``[s, e)`` = Σ of its blocks (each clipped to ≥ 1 µs);
* transfer time per sample over cut ``i`` = ``S_i · 8 / (BW · 1000)`` µs for a
  bandwidth ``BW`` in Gbit/s; a batch of ``b`` moves ``b`` times as much.

:func:`read_ppipe_dir` reads the authors' artifact layout; :func:`to_frame` /
:func:`from_frame` convert to and from the ``block_profiles`` artifact.
:func:`prepartition` is the §5.2 greedy grouping of per-layer latencies.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from shepherd.core.errors import UserError

#: MPS levels k (file suffix) and the batch sizes profiled at each (data README)
MPS_LEVELS = (1, 2, 3, 4)
DEFAULT_SLO_SCALE = 5.0
GPU_TYPES = ("V100", "L4", "T4", "P4")


@dataclass
class BlockProfile:
    """Block latencies of one DNN on every (GPU type, MPS level k) profiled."""

    model: str
    blocks: int
    lat: dict[tuple[str, int], np.ndarray]  # (hardware, k) -> int64 (blocks, max batch) µs
    cut_bytes: np.ndarray  # (blocks - 1,) bytes per sample after block i
    ref_latency_us: float  # mean L4 batch-1 whole-model latency (SLO base, §7.1)
    _cum: dict[tuple[str, int], np.ndarray] = field(default_factory=dict, repr=False)

    def slo_us(self, scale: float = DEFAULT_SLO_SCALE) -> int:
        """The latency SLO: ``scale`` × the L4 batch-1 latency (§7.1, Fig. 13(a) varies scale)."""
        return int(round(scale * self.ref_latency_us))

    def levels(self, hardware: str) -> list[int]:
        return sorted(k for (h, k) in self.lat if h == hardware)

    def max_batch(self, hardware: str, k: int) -> int:
        return int(self.lat[(hardware, k)].shape[1])

    def partition_us(self, hardware: str, k: int, batch: int, start: int, end: int) -> int:
        """Latency of blocks ``[start, end)`` at ``batch`` on a 1/k share of ``hardware``."""
        key = (hardware, k)
        cum = self._cum.get(key)
        if cum is None:
            arr = self.lat[key]
            cum = np.vstack([np.zeros((1, arr.shape[1]), np.int64), np.cumsum(arr, axis=0)])
            self._cum[key] = cum
        return int(cum[end, batch - 1] - cum[start, batch - 1])

    def whole_us(self, hardware: str, batch: int = 1, k: int = 1) -> int:
        return self.partition_us(hardware, k, batch, 0, self.blocks)

    def transfer_us_per_sample(self, cut: int, bandwidth_gbps: float) -> float:
        """µs to send one sample's feature map over cut ``cut`` (after block ``cut``)."""
        if bandwidth_gbps <= 0:
            raise UserError(f"bandwidth must be positive, got {bandwidth_gbps:g} Gbit/s")
        return float(self.cut_bytes[cut]) * 8.0 / (bandwidth_gbps * 1000.0)


def transfer_us(profile: BlockProfile, end: int, batch: int, bandwidth_gbps: float) -> int:
    """Integer µs to send a batch's feature map after a partition ending at block ``end`` (0 at the end)."""
    if end >= profile.blocks:
        return 0
    return int(math.ceil(batch * profile.transfer_us_per_sample(end - 1, bandwidth_gbps)))


# --------------------------------------------------------------------------- reading the authors' data

def model_list(root: Path) -> list[str]:
    path = Path(root) / "model_list.txt"
    if not path.exists():
        raise UserError(f"{root}: no model_list.txt (is this the PPipe data folder?)")
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


def _read_table(path: Path) -> np.ndarray:
    try:
        rows = [[float(x) for x in line.split(",")] for line in path.read_text().splitlines() if line.strip()]
        arr = np.array(rows, dtype=np.float64)
    except ValueError:
        raise UserError(f"{path.name}: non-numeric latency") from None
    if arr.ndim != 2 or arr.size == 0:
        raise UserError(f"{path.name}: expected a blocks × batch-size table")
    return np.maximum(np.rint(arr), 1).astype(np.int64)  # the planner clips each chunk to ≥ 1 µs


def _ref_latency_us(root: Path, model: str) -> float:
    path = root / "models" / "model-profile-tf32" / model / "L4-1" / "1" / f"{model}-L4.engine.timing.json"
    if not path.exists():
        raise UserError(f"{model}: missing L4 whole-model timing ({path.name}); it defines the SLO")
    try:
        entries = json.loads(path.read_text())
        return 1000.0 * float(np.mean([float(e["computeMs"]) for e in entries]))
    except (ValueError, KeyError, TypeError):
        raise UserError(f"{path.name}: malformed TensorRT timing JSON") from None


def read_model(root: Path, model: str, hardware: tuple[str, ...] = GPU_TYPES) -> BlockProfile:
    """One model's block profile from the PPipe data folder (layout in its README)."""
    root = Path(root)
    timing = root / "models" / "block-timing-tf32"
    lat: dict[tuple[str, int], np.ndarray] = {}
    for hw in hardware:
        for k in MPS_LEVELS:
            path = timing / f"{model}-{hw}-{k}.csv"
            if path.exists():
                lat[(hw, k)] = _read_table(path)
        if (hw, 1) not in lat:
            raise UserError(f"{model}: no block timings on {hw} ({model}-{hw}-1.csv missing)")
    blocks = {a.shape[0] for a in lat.values()}
    if len(blocks) != 1:
        raise UserError(f"{model}: block tables disagree on the number of blocks ({sorted(blocks)})")
    n_blocks = blocks.pop()
    cuts_files = sorted((root / "prepartition_mappings" / model).glob("contraction_trans-size_*.csv"))
    if not cuts_files:
        raise UserError(f"{model}: no contraction_trans-size_*.csv (cut sizes) in prepartition_mappings")
    try:
        cut = np.array([int(x) for x in cuts_files[0].read_text().split()], dtype=np.int64)
    except ValueError:
        raise UserError(f"{cuts_files[0].name}: non-integer cut size") from None
    if cut.size != n_blocks - 1:
        raise UserError(f"{model}: {cut.size} cut sizes for {n_blocks} blocks (expected {n_blocks - 1})")
    return BlockProfile(model, n_blocks, lat, cut, _ref_latency_us(root, model))


def read_ppipe_dir(root: str | Path, models: list[str] | None = None,
                   hardware: tuple[str, ...] = GPU_TYPES) -> list[BlockProfile]:
    """Block profiles of ``models`` (default: the 18 of ``model_list.txt``)."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"PPipe data folder not found: {root}")
    names = models if models else model_list(root)
    return [read_model(root, m, hardware) for m in names]


# --------------------------------------------------------------------------- artifact frames

def to_frame(profiles: list[BlockProfile]) -> pl.DataFrame:
    """Rows model × hardware × mps (k − 1) × batch × block (artifact kind ``block_profiles``)."""
    cols: dict[str, list] = {c: [] for c in ("model", "hardware", "mps", "batch", "block", "latency_us",
                                             "cut_bytes", "ref_latency_us")}
    for p in profiles:
        for (hw, k), arr in sorted(p.lat.items()):
            nb, mb = arr.shape
            for b in range(mb):
                for i in range(nb):
                    cols["model"].append(p.model)
                    cols["hardware"].append(hw)
                    cols["mps"].append(k - 1)
                    cols["batch"].append(b + 1)
                    cols["block"].append(i)
                    cols["latency_us"].append(int(arr[i, b]))
                    cols["cut_bytes"].append(int(p.cut_bytes[i]) if i < nb - 1 else None)
                    cols["ref_latency_us"].append(p.ref_latency_us)
    return pl.DataFrame(cols, schema={"model": pl.String, "hardware": pl.String, "mps": pl.Int32,
                                      "batch": pl.Int32, "block": pl.Int32, "latency_us": pl.Int64,
                                      "cut_bytes": pl.Int64, "ref_latency_us": pl.Float64})


def from_frame(frame: pl.DataFrame, models: list[str] | None = None) -> dict[str, BlockProfile]:
    """Block profiles by model from a ``block_profiles`` frame (checks the table is dense)."""
    known = sorted(frame["model"].unique().to_list())
    wanted = models if models is not None else known
    out: dict[str, BlockProfile] = {}
    for m in wanted:
        rows = frame.filter(pl.col("model") == m)
        if rows.height == 0:
            raise UserError(f"block profiles have no model '{m}' (known: {', '.join(known[:5])}…)")
        n_blocks = int(rows["block"].max()) + 1
        lat = {}
        for (hw, mps), part in rows.group_by(["hardware", "mps"], maintain_order=True):
            mb = int(part["batch"].max())
            if part.height != mb * n_blocks:
                raise UserError(f"block profiles of '{m}' on {hw} mps {mps}: missing batch sizes or blocks")
            arr = np.zeros((n_blocks, mb), np.int64)
            arr[part["block"].to_numpy(), part["batch"].to_numpy() - 1] = part["latency_us"].to_numpy()
            lat[(str(hw), int(mps) + 1)] = np.maximum(arr, 1)
        cuts = (rows.filter(pl.col("cut_bytes").is_not_null()).select("block", "cut_bytes").unique()
                .sort("block"))
        if cuts.height != n_blocks - 1:
            raise UserError(f"block profiles of '{m}': expected {n_blocks - 1} cut sizes, found {cuts.height}")
        out[m] = BlockProfile(m, n_blocks, lat, cuts["cut_bytes"].to_numpy().astype(np.int64),
                              float(rows["ref_latency_us"][0]))
    return out


# --------------------------------------------------------------------------- §5.2 pre-partitioning

def prepartition(layer_us: np.ndarray, n_blocks: int) -> np.ndarray:
    """Group consecutive layers into ``n_blocks`` blocks of ≈ equal runtime (§5.2).

    "Start from the first layer and sequentially group consecutive layers
    together until their combined runtime is as close as possible to 1/N of the
    runtime of the entire DNN; repeat until the last layer." Each block's target
    is measured against what remains (remaining time / remaining blocks) so the
    last block is not starved; every block gets ≥ 1 layer. Returns the block id
    of every layer (non-decreasing, 0 … n_blocks − 1).
    """
    lat = np.asarray(layer_us, dtype=np.float64)
    n = lat.size
    if n_blocks < 1 or n_blocks > n:
        raise UserError(f"cannot split {n} layers into {n_blocks} blocks")
    if (lat < 0).any():
        raise UserError("layer latencies must be non-negative")
    out = np.zeros(n, np.int64)
    i = 0
    for blk in range(n_blocks):
        left_blocks = n_blocks - blk
        if left_blocks == 1:
            out[i:] = blk
            break
        target = lat[i:].sum() / left_blocks
        acc = 0.0
        j = i
        last_allowed = n - (left_blocks - 1)  # leave one layer for each later block
        while j < last_allowed:
            nxt = acc + lat[j]
            if j > i and abs(nxt - target) > abs(acc - target):
                break
            acc = nxt
            j += 1
        out[i:j] = blk
        i = j
    return out
