"""Autoscaling advice from bad rate and GPU idle fraction (Symphony §4.4).

Per epoch the scheduler looks at two signals (``core.engine.windows``):

* **bad rate** r (requests that finished late or were dropped / arrivals):
  above ``bad_threshold`` the autoscaler asks for ``N·r/(1 − r)`` more GPUs
  ("Allocate GPUs": with a flat top, the cluster serves its peak p and the
  offered load is o ≈ p/(1 − r), so p·r/(1−r) more capacity is missing);
* **idle fraction** f: otherwise it releases ``N·f`` GPUs ("Deallocate GPUs":
  below the peak, f ≈ (p − o)/p).

N is the number of GPUs in the epoch. Advice is rounded: up when adding,
down when releasing, so a cluster never oscillates around a fractional GPU.
:func:`advise` is a pure function of one epoch's signals;
:func:`advice_frame` applies it to a whole ``windows`` table (open loop, the
advice plotted in Fig. 14); a policy's closed loop (``symphony``'s
``autoscale_epoch_s``) calls :func:`advise` each epoch and adds or removes
workers accordingly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

from shepherd.core.errors import UserError


@dataclass(frozen=True)
class AutoscaleConfig:
    bad_threshold: float = 0.01  #: bad rate above which GPUs are added
    min_gpus: int = 1
    max_gpus: int = 1_000_000

    def validate(self) -> None:
        if not 0 <= self.bad_threshold < 1:
            raise UserError(f"autoscale bad_threshold must be in [0, 1), got {self.bad_threshold}")
        if not 1 <= self.min_gpus <= self.max_gpus:
            raise UserError(f"autoscale needs 1 ≤ min_gpus ≤ max_gpus, got {self.min_gpus}, {self.max_gpus}")


def advise(gpus: int, bad_rate: float, idle_fraction: float, cfg: AutoscaleConfig = AutoscaleConfig()) -> int:
    """GPUs to add (> 0) or release (< 0) after an epoch with these signals (module docstring)."""
    if bad_rate > cfg.bad_threshold:
        r = min(bad_rate, 0.99)
        delta = math.ceil(gpus * r / (1.0 - r) - 1e-9)
    else:
        delta = -math.floor(gpus * max(0.0, idle_fraction) + 1e-9)
    return max(cfg.min_gpus, min(cfg.max_gpus, gpus + delta)) - gpus


def advice_frame(windows: pl.DataFrame, epoch_us: int, cfg: AutoscaleConfig = AutoscaleConfig()) -> pl.DataFrame:
    """Per epoch of a ``windows`` table: GPUs present (capacity / epoch) and the advice."""
    gpus = (windows["capacity_us"] / epoch_us).round().cast(pl.Int64).to_list()
    adv = [advise(max(1, n), b, f, cfg) for n, b, f in zip(gpus, windows["bad_rate"].to_list(),
                                                          windows["idle_fraction"].to_list())]
    return windows.with_columns(gpus=pl.Series(gpus, dtype=pl.Int64), advice=pl.Series(adv, dtype=pl.Int64))
