"""Heterogeneous GPU clusters for pool-based pipelines (PPipe §7.1, Table 1).

A cluster has GPU types with counts, GPUs grouped onto servers (nodes) that
share one NIC, and a claimed interconnect bandwidth. §7.1: "the effective
bandwidth for both large and small clusters is only 1/5 the claimed values in
Table 1" — :attr:`ClusterSpec.bandwidth_gbps` is the *effective* value used
everywhere (planner transfer times, the data plane's link reservations).

GPUs per server follow the authors' reference plans (data README): HC1
(L4–P4): L4 1, P4 1; HC2 (L4–T4): L4 4, T4 2; HC3 (V100–P4): V100 2, P4 1;
HC4 (V100–T4): V100 4, T4 2. Large (``-L``) variants have 25 high-class + 75
low-class GPUs, small (``-S``) 4 + 12. §7.4 mentions "10 Gbps effective
bandwidth" for HC2-L; Table 1 / 5 gives 6.4 — we follow Table 1 (documented
choice).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shepherd.core.errors import UserError

BANDWIDTH_DIVISOR = 5.0  # §7.1: effective bandwidth = claimed / 5


@dataclass(frozen=True)
class GpuPool:
    """All GPUs of one type: count, per-server packing, high or low class."""

    hardware: str
    count: int
    per_server: int
    high: bool


@dataclass(frozen=True)
class ClusterSpec:
    """A heterogeneous cluster (Table 1): GPU pools and the effective NIC bandwidth."""

    name: str
    pools: tuple[GpuPool, ...]
    bandwidth_gbps: float  # effective (claimed / 5)

    def validate(self) -> "ClusterSpec":
        if not self.bandwidth_gbps > 0 or not math.isfinite(self.bandwidth_gbps):
            raise UserError(f"cluster {self.name}: bandwidth must be positive, got {self.bandwidth_gbps:g} Gbit/s")
        seen = set()
        for p in self.pools:
            if p.hardware in seen:
                raise UserError(f"cluster {self.name}: GPU type {p.hardware} listed twice")
            seen.add(p.hardware)
            if p.count < 0 or p.per_server < 1:
                raise UserError(f"cluster {self.name}: bad count/per-server for {p.hardware}")
        if sum(p.count for p in self.pools) < 1:
            raise UserError(f"cluster {self.name} has no GPUs")
        return self

    @property
    def hardware(self) -> list[str]:
        return [p.hardware for p in self.pools]

    def count(self, hardware: str) -> int:
        return next((p.count for p in self.pools if p.hardware == hardware), 0)

    def per_server(self, hardware: str) -> int:
        return next(p.per_server for p in self.pools if p.hardware == hardware)

    @property
    def gpus(self) -> int:
        return sum(p.count for p in self.pools)

    def scaled(self, total: int, name: str | None = None) -> "ClusterSpec":
        """The same type mix scaled to ``total`` GPUs (Fig. 14(a): 100 … 100k GPUs)."""
        base = self.gpus
        counts = [max(1, round(p.count * total / base)) for p in self.pools]
        pools = tuple(GpuPool(p.hardware, c, p.per_server, p.high) for p, c in zip(self.pools, counts))
        return ClusterSpec(name or f"{self.name}x{total}", pools, self.bandwidth_gbps)

    def with_counts(self, counts: dict[str, int], name: str | None = None) -> "ClusterSpec":
        """Same types, new counts (Fig. 13(b): high:low GPU ratio)."""
        pools = tuple(GpuPool(p.hardware, counts.get(p.hardware, p.count), p.per_server, p.high)
                      for p in self.pools)
        return ClusterSpec(name or self.name, pools, self.bandwidth_gbps)

    def with_bandwidth(self, effective_gbps: float) -> "ClusterSpec":
        return ClusterSpec(self.name, self.pools, effective_gbps).validate()


#: Table 1: (high type, low type, claimed Gbit/s); per-server counts from the reference plans
_HC = {
    "HC1": ("L4", 1, "P4", 1, 50.0),
    "HC2": ("L4", 4, "T4", 2, 32.0),
    "HC3": ("V100", 2, "P4", 1, 50.0),
    "HC4": ("V100", 4, "T4", 2, 32.0),
}
_SIZES = {"L": (25, 75), "S": (4, 12)}


def cluster_names() -> list[str]:
    return [f"{hc}-{s}" for hc in _HC for s in _SIZES]


def make_cluster(name: str, bandwidth_gbps: float | None = None) -> ClusterSpec:
    """``HC1-L`` … ``HC4-S`` (Table 1); ``bandwidth_gbps`` overrides the effective bandwidth."""
    try:
        hc, size = name.upper().split("-")
        high, hs, low, ls, claimed = _HC[hc]
        nh, nl = _SIZES[size]
    except (ValueError, KeyError):
        raise UserError(f"unknown cluster '{name}' (known: {', '.join(cluster_names())})") from None
    bw = claimed / BANDWIDTH_DIVISOR if bandwidth_gbps is None else bandwidth_gbps
    spec = ClusterSpec(f"{hc}-{size}", (GpuPool(high, nh, hs, True), GpuPool(low, nl, ls, False)), bw)
    return spec.validate()


def custom_cluster(counts: dict[str, int], bandwidth_gbps: float, per_server: dict[str, int] | None = None,
                   name: str = "custom", high: tuple[str, ...] = ("L4", "V100")) -> ClusterSpec:
    """A cluster from type counts (Fig. 14(b) adds GPU types; tests build tiny ones)."""
    per = per_server or {}
    pools = tuple(GpuPool(h, int(c), int(per.get(h, 1)), h in high) for h, c in counts.items())
    return ClusterSpec(name, pools, bandwidth_gbps).validate()
