"""Read a plan in the PPipe artifact's JSON format (``data/plans/…`` of GitHub ``JonnyKong/PPipe``).

The format (facts from the authors' published plans): a JSON list with one
object per DNN, each with

* ``config``: ``dnn_name``, ``sla`` (µs), ``bw_gbps`` (effective Gbit/s),
  ``gpu_name_arr`` (the cluster's GPU types), ``num_gpu_per_server_arr``
  (aligned with it) and ``hist_adjustment`` (the SLO margin, µs);
* ``pipelines``: each a list ``partitions`` of ``{dnn, layers: [start, end),
  gpu, mps (zero-based MPS level: a 1/(mps+1) share), bs, num_gpu (physical
  GPUs), num_gpu_per_server, lat_infer (µs), lat_trans (µs), xput (req/s)}``.

:func:`read_plan` turns it into a :class:`~.plan.PipelinePlan` (planner
``"imported"``): every field is checked and a malformed or inconsistent file
is a :class:`UserError` naming the field (``[2].pipelines[0].partitions[1].layers``).
The file carries neither the cluster's GPU counts nor the workload shares:
the cluster is a Table 1 name (given, else from the GPU types and the file
name's ``25-75`` / ``4-12``), the shares are given, else read from the file
name's ``0.3-0.33-0.37``, else equal.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from shepherd.core.bounds import MAX_BATCH, MAX_MPS_LEVEL
from shepherd.core.errors import UserError
from shepherd.core.pipelines.blocks import BlockProfile
from shepherd.core.pipelines.cluster import ClusterSpec, GpuPool, make_cluster
from shepherd.core.pipelines.plan import Pipeline, PipelinePlan, Stage

#: Table 1 cluster by its GPU types
_BY_TYPES = {frozenset({"L4", "P4"}): "HC1", frozenset({"L4", "T4"}): "HC2",
             frozenset({"V100", "P4"}): "HC3", frozenset({"V100", "T4"}): "HC4"}


_KIND = {dict: "an object", list: "a list", str: "a string", int: "a whole number", float: "a number"}


def _get(obj: Any, key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise UserError(f"plan file: {where}.{key} is missing")
    value = obj[key]
    if kind in (int, float, (int, float)) and isinstance(value, bool):
        raise UserError(f"plan file: {where}.{key} must be a number, got {value!r}")
    if not isinstance(value, kind):
        want = _KIND.get(kind, "a number") if not isinstance(kind, tuple) else "a number"
        raise UserError(f"plan file: {where}.{key} must be {want}, got {type(value).__name__}")
    return value


def _num(obj: Any, key: str, where: str, low: float = 0.0, low_open: bool = False) -> float:
    v = float(_get(obj, key, where, (int, float)))
    if not math.isfinite(v) or v < low or (low_open and v == low):
        raise UserError(f"plan file: {where}.{key} must be {'>' if low_open else '≥'} {low:g}, got {v:g}")
    return v


def _int(obj: Any, key: str, where: str, low: int, high: int | None = None) -> int:
    v = _num(obj, key, where, low)
    if v != int(v):
        raise UserError(f"plan file: {where}.{key} must be a whole number, got {v:g}")
    if high is not None and v > high:
        raise UserError(f"plan file: {where}.{key} must be ≤ {high:,} (core/bounds.py), got {v:g}")
    return int(v)


def read_plan(path: str | Path, cluster: str | None = None, weights: list[float] | None = None,
              profiles: dict[str, BlockProfile] | None = None) -> PipelinePlan:
    """The artifact plan at ``path`` as a pipeline plan (module docstring); ``profiles``, when given,
    must cover every DNN and each pipeline's layers must span the DNN's blocks."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"plan file not found: {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"plan file {path.name} is not JSON ({_first_line(e)})") from None
    except RecursionError:
        raise UserError(f"plan file {path.name} is nested too deeply to be a PPipe plan") from None
    if not isinstance(data, list) or not data:
        raise UserError("plan file: the top level must be a non-empty list (one object per DNN)")
    types: list[str] | None = None
    per_server: dict[str, int] = {}
    bw = None
    pipes: list[Pipeline] = []
    slo: dict[str, int] = {}
    margins = []
    for i, entry in enumerate(data):
        where = f"[{i}]"
        cfg = _get(entry, "config", where, dict)
        cw = f"{where}.config"
        dnn = _get(cfg, "dnn_name", cw, str)
        if not dnn:
            raise UserError(f"plan file: {cw}.dnn_name is empty")
        if dnn in slo:
            raise UserError(f"plan file: {cw}.dnn_name '{dnn}' appears twice")
        sla = _num(cfg, "sla", cw, 0.0, low_open=True)
        slo[dnn] = int(round(sla))
        margins.append(_num(cfg, "hist_adjustment", cw) / sla if "hist_adjustment" in cfg else 0.0)
        b = _num(cfg, "bw_gbps", cw, 0.0, low_open=True)
        if bw is not None and b != bw:
            raise UserError(f"plan file: {cw}.bw_gbps {b:g} differs from the first DNN's {bw:g}")
        bw = b
        names = _get(cfg, "gpu_name_arr", cw, list)
        counts = _get(cfg, "num_gpu_per_server_arr", cw, list)
        if not names or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
            raise UserError(f"plan file: {cw}.gpu_name_arr must list distinct GPU type names")
        if len(counts) != len(names) or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 1
                                                for c in counts):
            raise UserError(f"plan file: {cw}.num_gpu_per_server_arr must give a whole number ≥ 1 per GPU type")
        if types is not None and names != types:
            raise UserError(f"plan file: {cw}.gpu_name_arr {names} differs from the first DNN's {types}")
        types = names
        per_server = dict(zip(names, counts))
        for pi, pipe in enumerate(_get(entry, "pipelines", where, list)):
            pw = f"{where}.pipelines[{pi}]"
            parts = _get(pipe, "partitions", pw, list)
            if not parts:
                raise UserError(f"plan file: {pw}.partitions is empty")
            if len(parts) > 3:
                raise UserError(f"plan file: {pw}.partitions has {len(parts)} partitions (1–3 allowed)")
            stages = []
            batch = None
            prev_end = 0
            for j, part in enumerate(parts):
                sw = f"{pw}.partitions[{j}]"
                if _get(part, "dnn", sw, str) != dnn:
                    raise UserError(f"plan file: {sw}.dnn '{part['dnn']}' is not {cw}.dnn_name '{dnn}'")
                layers = _get(part, "layers", sw, list)
                if (len(layers) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in layers)
                        or not 0 <= layers[0] < layers[1]):
                    raise UserError(f"plan file: {sw}.layers must be [start, end) with 0 ≤ start < end, "
                                    f"got {layers}")
                if layers[0] != prev_end:
                    raise UserError(f"plan file: {sw}.layers starts at {layers[0]}, expected {prev_end} "
                                    "(partitions must be contiguous from 0)")
                prev_end = layers[1]
                gpu = _get(part, "gpu", sw, str)
                if gpu not in names:
                    raise UserError(f"plan file: {sw}.gpu '{gpu}' is not in {cw}.gpu_name_arr {names}")
                if "num_gpu_per_server" in part and _int(part, "num_gpu_per_server", sw, 1) != per_server[gpu]:
                    raise UserError(f"plan file: {sw}.num_gpu_per_server {part['num_gpu_per_server']} differs "
                                    f"from {cw}.num_gpu_per_server_arr ({per_server[gpu]} for {gpu})")
                k = _int(part, "mps", sw, 0, MAX_MPS_LEVEL) + 1
                bs = _int(part, "bs", sw, 1, MAX_BATCH)
                if batch is not None and bs != batch:
                    raise UserError(f"plan file: {sw}.bs {bs} differs from partition 0's {batch} "
                                    "(one batch size per pipeline)")
                batch = bs
                n_gpu = _num(part, "num_gpu", sw, 0.0, low_open=True)
                vg = n_gpu * k
                if abs(vg - round(vg)) > 1e-6:
                    raise UserError(f"plan file: {sw}.num_gpu {n_gpu:g} is not a whole number of 1/{k} "
                                    "virtual GPUs")
                vg = int(round(vg))
                lat = _num(part, "lat_infer", sw)
                trans = _num(part, "lat_trans", sw)
                xput = _num(part, "xput", sw)
                stages.append(Stage(gpu, k, layers[0], layers[1], vg, int(round(lat)),
                                    0 if j == len(parts) - 1 else int(math.ceil(trans - 1e-9)), xput / vg))
            if profiles is not None:
                prof = profiles.get(dnn)
                if prof is None:
                    raise UserError(f"plan file: {cw}.dnn_name '{dnn}' is not in the profiles")
                if prev_end != prof.blocks:
                    raise UserError(f"plan file: {pw}.partitions end at layer {prev_end}; '{dnn}' has "
                                    f"{prof.blocks} blocks")
            pipes.append(Pipeline(dnn, batch, tuple(stages)))
    spec = _cluster(path, cluster, types or [], per_server, float(bw))
    used: dict[str, float] = {}
    for p in pipes:
        for s in p.stages:
            used[s.hardware] = used.get(s.hardware, 0.0) + s.gpus
    for h, n in used.items():
        if math.ceil(n - 1e-9) > spec.count(h):
            raise UserError(f"plan file: its pipelines use {n:g} {h} GPUs; cluster {spec.name} has {spec.count(h)}")
    dnns = list(slo)
    shares = _weights(path, weights, len(dnns))
    margin = sum(margins) / len(margins)
    return PipelinePlan(pipes, spec, dict(zip(dnns, shares)), slo, margin, "imported",
                        {"imported_from": path.name, "status": "imported"})


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def _cluster(path: Path, name: str | None, types: list[str], per_server: dict[str, int], bw: float) -> ClusterSpec:
    if name is None:
        hc = _BY_TYPES.get(frozenset(types))
        if hc is None:
            raise UserError(f"plan file: GPU types {types} are not a Table 1 cluster; give --cluster")
        size = "S" if re.search(r"_4-12_", path.name) else "L"
        name = f"{hc}-{size}"
    spec = make_cluster(name, bw)
    if set(spec.hardware) != set(types):
        raise UserError(f"cluster {spec.name} has GPU types {spec.hardware}; the plan file's gpu_name_arr is {types}")
    pools = tuple(GpuPool(p.hardware, p.count, per_server.get(p.hardware, p.per_server), p.high) for p in spec.pools)
    return ClusterSpec(spec.name, pools, bw).validate()


def _weights(path: Path, given: list[float] | None, n: int) -> list[float]:
    if given is not None:
        if len(given) != n:
            raise UserError(f"--weights gives {len(given)} shares; the plan file has {n} DNNs")
        if any(not (w >= 0 and math.isfinite(w)) for w in given) or sum(given) <= 0:
            raise UserError("--weights must be non-negative with a positive sum")
        return [w / sum(given) for w in given]
    for m in re.finditer(r"_((?:\d+(?:\.\d+)?-)+\d+(?:\.\d+)?)_", path.name):
        parts = [float(x) for x in m.group(1).split("-")]
        if len(parts) == n and abs(sum(parts) - 1.0) < 1e-6:
            return parts
    return [1.0 / n] * n
