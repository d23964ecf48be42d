"""Layer → stage assignment of a pipeline configuration (Accordion §3.1; stand-in for Shisha [38]).

The seed derives its pipeline configurations with Shisha, a layer-to-pipeline
mapping heuristic. We use the exact optimum of the same objective instead:
split the model's layers, in execution order, into ``depth`` contiguous
stages so that the slowest stage (the *bottleneck*, which sets the
pipeline's throughput) is as fast as possible. A stage's latency is the sum
of its layers' latencies on one EP (§4.1: "the execution time of a stage is
calculated as the sum of execution times of each layer").

Dynamic programme: ``best[k][j]`` = smallest bottleneck of the first ``j``
layers on ``k`` stages = ``min_i max(best[k-1][i], sum(layers[i:j]))``;
O(depth · L²), L ≤ a few hundred layers. Ties are broken towards the
earliest cut, so the result is deterministic.
"""

from __future__ import annotations

from itertools import accumulate


def partition(layers: list[float], depth: int) -> list[int]:
    """Stage sizes (layers per stage, e.g. ``[2, 4, 4, 3]``) minimising the bottleneck stage."""
    n = len(layers)
    if depth < 1:
        raise ValueError(f"depth must be ≥ 1, got {depth}")
    if depth > n:
        raise ValueError(f"cannot split {n} layers into {depth} stages")
    pre = [0.0, *accumulate(layers)]
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(depth + 1)]
    cut = [[0] * (n + 1) for _ in range(depth + 1)]
    best[0][0] = 0.0
    for k in range(1, depth + 1):
        for j in range(k, n - (depth - k) + 1):
            bk, ck = inf, k - 1
            for i in range(k - 1, j):
                v = max(best[k - 1][i], pre[j] - pre[i])
                if v < bk:
                    bk, ck = v, i
            best[k][j], cut[k][j] = bk, ck
    sizes, j = [], n
    for k in range(depth, 0, -1):
        i = cut[k][j]
        sizes.append(j - i)
        j = i
    return sizes[::-1]


def stage_latencies(layers: list[float], sizes: list[int]) -> list[float]:
    """Latency of each stage: the sum of its layers' latencies."""
    out, i = [], 0
    for s in sizes:
        out.append(float(sum(layers[i:i + s])))
        i += s
    return out
