"""Candidate pooled-pipeline configurations for the PPipe MILP (Appendix A.2, Table 5).

A *template* is a sequence of GPU types, one per partition, at most 3 long
(§3 "Encoding model partition and placement": with 2 GPU types, 2 + 4 + 8 =
14 pooled pipelines). A *configuration* of a template fixes everything the
A.2 variables ``p_{ldvbij}`` choose: the partition points (blocks ``[i, j)``
of each partition), the unified batch size ``b`` (Eq. 18) and each
partition's virtual-GPU size ``1/v`` (MPS level). For a configuration this
module derives the Table 5 constants:

* ``C`` — partition latency (sum of its blocks, µs),
* ``Y`` — transfer latency of the feature map leaving the partition,
  ``b · S_{j−1} · 8 / (BW·1000)`` µs (0 after the last partition),
* ``X`` — throughput of one virtual GPU, req/s:
  ``min(b·10⁶/C, 10⁶/(T_in·v·g), 10⁶/(T_out·v·g))`` where ``T`` is the
  per-sample transfer time over the partition's input/output cut and ``v·g``
  virtual GPUs of a server share its NIC (data README; §4 C3).

Only configurations meeting Eq. 27 with the planning margin,
``Σ C + Σ Y ≤ SLO·(1 − margin)`` (§7.1: 40 %), are kept. Then, per template
and MPS-level tuple, configurations whose per-partition throughputs are
dominated by another's are dropped: same GPU types and levels means the same
GPU cost for the same vGPU counts, so a dominated configuration can never do
better (an exact reduction of the MILP).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from shepherd.core.pipelines.blocks import BlockProfile
from shepherd.core.pipelines.cluster import ClusterSpec

MAX_PARTITIONS = 3  # §3: "we restrict a DNN model to be divided into at most 3 partitions"


@dataclass(frozen=True)
class Config:
    """One feasible pooled-pipeline configuration of one DNN."""

    model: str
    template: tuple[str, ...]  # GPU type per partition
    levels: tuple[int, ...]  # MPS level k per partition (a 1/k virtual GPU)
    bounds: tuple[int, ...]  # partition points 0 = b_0 < b_1 < … < b_D = B
    batch: int
    latency_us: tuple[int, ...]  # C per partition
    transfer_us: tuple[int, ...]  # Y after each partition (0 after the last)
    xput: tuple[float, ...]  # X per virtual GPU, req/s

    @property
    def partitions(self) -> int:
        return len(self.template)

    @property
    def total_us(self) -> int:
        return sum(self.latency_us) + sum(self.transfer_us)


def templates(hardware: list[str], max_partitions: int = MAX_PARTITIONS) -> list[tuple[str, ...]]:
    """All GPU-type sequences of length 1 … ``max_partitions`` (2 types, 3 partitions: 14)."""
    out: list[tuple[str, ...]] = []
    for d in range(1, max_partitions + 1):
        out += list(itertools.product(hardware, repeat=d))
    return out


def _cut_sets(blocks: int, parts: int) -> list[tuple[int, ...]]:
    return [(0, *inner, blocks) for inner in itertools.combinations(range(1, blocks), parts - 1)]


def enumerate_configs(profile: BlockProfile, cluster: ClusterSpec, budget_us: float,
                      max_partitions: int = MAX_PARTITIONS, prune: bool = True,
                      mps: bool = True, build_us: float = 0.0, link_share: str = "server") -> list[Config]:
    """Every latency-feasible configuration of ``profile`` on ``cluster`` (pruned if asked).

    ``budget_us`` is the planning latency budget SLO·(1 − margin). ``mps=False``
    restricts every partition to whole GPUs (DART-r). ``build_us``: the
    batch-building latency per request beyond the first (the artifact MILP's
    term ``1.3·10⁶·(b−1)/est_xput``), counted against the budget only.
    ``link_share``: how many vGPUs share a partition's link (:func:`link_shares`).
    """
    bw = cluster.bandwidth_gbps
    hw_list = [h for h in cluster.hardware if cluster.count(h) > 0]
    per_sample = profile.cut_bytes.astype(np.float64) * 8.0 / (bw * 1000.0)  # µs per sample per cut
    out: list[Config] = []
    for tpl in templates(hw_list, max_partitions):
        d = len(tpl)
        level_opts = [[k for k in profile.levels(h) if mps or k == 1] for h in tpl]
        groups: dict[tuple[int, ...], list[Config]] = {}
        for bounds in _cut_sets(profile.blocks, d):
            for levels in itertools.product(*level_opts):
                max_b = min(profile.max_batch(h, k) for h, k in zip(tpl, levels))
                for b in range(1, max_b + 1):
                    lat = tuple(profile.partition_us(h, k, b, bounds[p], bounds[p + 1])
                                for p, (h, k) in enumerate(zip(tpl, levels)))
                    trs = tuple(int(np.ceil(b * per_sample[bounds[p + 1] - 1])) if p < d - 1 else 0
                                for p in range(d))
                    if sum(lat) + sum(trs) + build_us * (b - 1) > budget_us:
                        continue
                    xs = []
                    for p, (h, k) in enumerate(zip(tpl, levels)):
                        x = b * 1e6 / lat[p]
                        share_in, share_out = link_shares(cluster, tpl, levels, p, link_share)
                        if p > 0:
                            x = min(x, 1e6 / (per_sample[bounds[p] - 1] * share_in))
                        if p < d - 1:
                            x = min(x, 1e6 / (per_sample[bounds[p + 1] - 1] * share_out))
                        xs.append(x)
                    cfg = Config(profile.model, tpl, levels, bounds, b, lat, trs, tuple(xs))
                    groups.setdefault(levels, []).append(cfg)
        for cfgs in groups.values():
            out += _pareto(cfgs) if prune else cfgs
    return out


LINK_SHARES = ("server", "stage")


def link_shares(cluster: ClusterSpec, tpl: tuple[str, ...], levels: tuple[int, ...], p: int,
                mode: str = "server") -> tuple[int, int]:
    """vGPUs sharing partition ``p``'s (receive, send) link, for its throughput cap ``X``.

    ``"server"`` (the paper's §4 C3 and the artifact MILP, ``ilp_v4.py``): a
    server's NIC, ``k · per_server`` vGPUs, both ways. ``"stage"``: the links
    the data plane builds with artifact rules (c) and (d)
    (:func:`shepherd.core.pipelines.runtime.stage_links`): a non-last stage's
    vGPUs share one link per ``k · max(per_server, next stage's per_server)``
    of them, a last stage's vGPUs receive on links of their own. The
    artifact's MILP and simulator disagree here (T4 → L4: the MILP shares a
    T4 uplink among 2 vGPUs, the simulator among 4); ``"stage"`` plans for the
    simulator's links (our addition, off in both named rule sets).
    """
    own = levels[p] * cluster.per_server(tpl[p])
    if mode == "server":
        return own, own
    last = p == len(tpl) - 1
    group = own if last else levels[p] * max(cluster.per_server(tpl[p]), cluster.per_server(tpl[p + 1]))
    return (1 if last else group), group


def _pareto(cfgs: list[Config]) -> list[Config]:
    """Configurations whose throughput vector no other configuration weakly dominates."""
    if len(cfgs) <= 1:
        return cfgs
    xs = np.array([c.xput for c in cfgs])
    ge = (xs[:, None, :] >= xs[None, :, :]).all(axis=2)  # ge[a, b]: a ≥ b everywhere
    gt = (xs[:, None, :] > xs[None, :, :]).any(axis=2)
    dominated = (ge & gt).any(axis=0)
    # exact ties: keep the first of each identical vector
    keep = []
    seen: set[tuple[float, ...]] = set()
    for c, dom in zip(cfgs, dominated):
        if dom or c.xput in seen:
            continue
        seen.add(c.xput)
        keep.append(c)
    return keep


def efficient_points(cfg: Config, counts: dict[str, int]) -> list[tuple[float, tuple[int, ...]]]:
    """Every vGPU-count vector of ``cfg`` worth using, with the pipeline throughput it gives.

    A pipeline with ``g_d`` vGPUs per partition serves ``x = min_d X_d·g_d``
    (Eqs. 25, 28). For any integer ``g``, the vector ``g'_d = ⌈x/X_d⌉ ≤ g_d``
    serves the same ``x`` with no more GPUs, and ``x`` is one of the
    breakpoints ``X_d·n``. So the points ``(X_d·n, ⌈X_d·n/X_{d'}⌉_{d'})``, for
    every partition ``d`` and ``n ≥ 1`` while the vector fits the cluster
    (``counts``: physical GPUs per type, ``g/v`` summed per type), contain an
    optimal choice of every MILP solution: choosing one of them per selected
    configuration is an exact reformulation of the integer counts ``g``
    (used by ``formulation="points"`` in :mod:`.ppipe_milp`). Sorted by ``x``.
    """
    bounds = [counts.get(h, 0) * k for h, k in zip(cfg.template, cfg.levels)]
    xs = sorted({x * n for x, u in zip(cfg.xput, bounds) for n in range(1, u + 1)})
    out: list[tuple[float, tuple[int, ...]]] = []
    for xb in xs:
        g = tuple(max(1, int(np.ceil(xb / x - 1e-9))) for x in cfg.xput)
        if any(n > u for n, u in zip(g, bounds)):
            break
        phys: dict[str, float] = {}
        for h, k, n in zip(cfg.template, cfg.levels, g):
            phys[h] = phys.get(h, 0.0) + n / k
        if any(v > counts.get(h, 0) + 1e-9 for h, v in phys.items()):
            break
        out.append((min(x * n for x, n in zip(cfg.xput, g)), g))
    return out
