"""Verifying a fast path: its kernel's whole tables compared with the reference engine's, and the stamp that
only such a comparison writes (DESIGN.md "Edit-safe by construction"; :mod:`.fastpath`).

* :func:`compare` takes a reference run and a fast run of the same inputs (each result says which engine ran,
  :class:`~.fastpath.Choice`) and compares every table — requests, batches, workers, summary, the shed
  requests and the policy's counters. When they are equal it keeps, in this process, the evidence: how many
  workloads, requests and batches agreed, against which verified source (the digest the kernel ran
  against).
* :func:`stamp` writes ``<policy module>.verified.json`` for a policy — only when this process holds evidence
  for the policy's current source; a run that merely ran the kernel leaves none.
* :func:`verify` (``shepherd verify POLICY``) makes that comparison for any policy with a fast path,
  a third party's included: ``workloads`` runs of both engines (the declaration's own, or synthetic traces on
  the built-in profiles cycling through its ``configs``), then the stamp.
"""

from __future__ import annotations

import dataclasses
import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from shepherd.core.engine import fastpath
from shepherd.core.errors import UserError

#: what a comparison compares, in the order it reports a difference
TABLES = ("requests", "batches", "workers", "summary", "shed requests", "policy counters")


@dataclass
class Evidence:
    """Comparisons of one policy's kernel with the reference that agreed, against one verified source."""

    policy: str
    digest: str
    workloads: int = 0
    requests: int = 0
    batches: int = 0
    by: set[str] = field(default_factory=set)

    def summary(self) -> dict[str, Any]:
        return {"by": sorted(self.by), "workloads": self.workloads, "requests": self.requests,
                "batches": self.batches, "tables": list(TABLES)}


_EVIDENCE: dict[tuple[str, str], Evidence] = {}


class Disagreement(AssertionError):
    """A kernel's tables differ from the reference's (a bug in the kernel or the reference)."""


@contextmanager
def comparing() -> Iterator[None]:
    """Within: ``--engine fast`` runs the kernel whatever its stamp says — it is being compared."""
    was = fastpath._comparing
    fastpath._comparing = True
    try:
        yield
    finally:
        fastpath._comparing = was


def _tables(res: Any) -> list[Any]:
    shed = np.sort(np.frombuffer(res.engine.admission.shed_ids, np.int64))
    return [res.requests_frame(), res.batches_frame(), res.workers_frame(), res.summary_frame(), shed,
            res.extra.get("policy_stats", {})]


def differences(a: Any, b: Any) -> list[str]:
    """The tables (:data:`TABLES`) in which two runs differ; [] when every one is identical."""
    out = []
    for name, x, y in zip(TABLES, _tables(a), _tables(b)):
        same = np.array_equal(x, y) if isinstance(x, np.ndarray) else (x == y if isinstance(x, dict) else x.equals(y))
        if not same:
            out.append(name)
    return out


def compare(a: Any, b: Any, by: str = "a comparison") -> None:
    """Assert that two runs' tables are identical (:class:`Disagreement` naming the tables that differ). When
    one ran the reference engine and the other a policy's kernel, the agreement is kept as evidence for that
    policy's verified source (what :func:`stamp` needs)."""
    diff = differences(a, b)
    if diff:
        raise Disagreement(f"policy '{a.policy}': {', '.join(diff)} differ between the "
                           f"{a.engine_ran['engine']} and the {b.engine_ran['engine']} engine")
    runs = {r.engine_ran["engine"]: r for r in (a, b)}
    fast = runs.get("fast")
    if len(runs) != 2 or a.policy != b.policy or fast is None or fast.choice.digest is None:
        return
    key = (a.policy, fast.choice.digest)
    ev = _EVIDENCE.setdefault(key, Evidence(a.policy, fast.choice.digest))
    ev.workloads += 1
    ev.requests += a.n_requests
    ev.batches += len(a.recorder.batch_columns(numbered=False)["size"]) if a.recorder.aggregates is None else 0
    ev.by.add(by)


def evidence(name: str, cls: type) -> Evidence | None:
    """This process's evidence for policy ``name``'s current verified source, or None."""
    return _EVIDENCE.get((name, fastpath.digest_of(fastpath.sources(cls))))


def stamp(name: str, cls: type) -> Path:
    """Record the current source of ``cls`` as the one policy ``name``'s fast path was verified against, with
    what was compared. Raises :class:`UserError` unless this process compared the kernel's whole tables with
    the reference's, against this very source (:func:`compare`)."""
    sources = fastpath.sources(cls)
    ev = _EVIDENCE.get((name, fastpath.digest_of(sources)))
    if ev is None or ev.workloads == 0:
        raise UserError(f"nothing compared the fast path of '{name}' with the reference against its current "
                        f"source in this process: no stamp (`shepherd verify {name}` compares)")
    path = fastpath.record_path(cls)
    data = fastpath.read_record(path)
    data[name] = {"class": fastpath.class_name(cls), "form": fastpath.FORM, "sources": sources,
                  "compared": ev.summary()}
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if not path.is_file() or path.read_text() != text:  # unchanged: left untouched
        path.write_text(text)
    return path


# ------------------------------------------------------------------------------------------- shepherd verify

#: the built-in profile the synthetic workloads use, and its models (ℓ(1) well below the SLOs drawn)
PROFILE = "shepherd-v100"
MODELS = ("ResNet18", "ResNet50", "ResNet101", "DenseNet121")
SLOS_US = (40_000, 90_000, 250_000)


def synthetic(seed: int, configs: tuple[dict, ...] = ({},)) -> dict[str, Any]:
    """One workload for policies that take the built-in profiles: 1–4 streams of Poisson arrivals over
    0.4 s (ties within a stream on odd seeds), 1–4 GPUs, a max batch of 128, 8 or 1, the policy's default
    overhead, none, or a heavier model with admission control, and ``configs[seed % len(configs)]``."""
    from shepherd.core.engine.overhead import OverheadConfig
    from shepherd.core.profiles import load_builtin
    from shepherd.traces.arrivals import poisson
    from shepherd.traces.synthetic import assemble

    rng = np.random.default_rng(seed)
    n = 1 + seed % 4
    arrs = [poisson(rng, float(rng.choice([300.0, 1500.0, 6000.0])), 400_000) for _ in range(n)]
    if seed % 2:
        arrs[0] = np.sort(np.concatenate([arrs[0], arrs[0][::4]]))
    trace = assemble(arrs, [MODELS[(seed + s) % len(MODELS)] for s in range(n)],
                     [int(rng.choice(SLOS_US)) for _ in range(n)])
    overheads = (None, OverheadConfig(mode="none"),
                 OverheadConfig(base_us=40.0, per_worker_us=3.0, per_request_us=25.0, arrival_us=120.0,
                                max_lag_us=3_000.0))
    return dict(trace=trace, profiles=load_builtin(PROFILE), config=dict(configs[seed % len(configs)]),
                gpus=1 + (seed // 4) % 4, seed=seed, overhead=overheads[seed % 3], max_batch=(128, 8, 1)[seed % 3])


@dataclass
class Report:
    """What :func:`verify` compared, and where it recorded it."""

    policy: str
    workloads: int
    requests: int
    batches: int
    tables: tuple[str, ...]
    files: list[str]
    record: Path


def verify(name: str, workloads: int = 12, progress: Callable[[int], None] | None = None) -> Report:
    """Run policy ``name`` on ``workloads`` workloads on both engines, compare every table (:func:`compare`)
    and, all identical, :func:`stamp` it. :class:`Disagreement` on the first difference (nothing stamped)."""
    from shepherd.core.engine.config import EngineConfig
    from shepherd.core.engine.simulate import simulate
    from shepherd.core.policies import registry

    if workloads < 1:
        raise UserError(f"--workloads must be ≥ 1, got {workloads}")
    cls = registry.get(name).cls
    fp = getattr(cls, "fast_path", None)
    if fp is None:
        have = [n for n in registry.names() if getattr(registry.get(n).cls, "fast_path", None) is not None]
        raise UserError(f"policy '{name}' has no fast path to verify (those with one: {', '.join(have)})")
    make = fp.workloads
    if make is None:
        if "profiles" not in cls.requires or len(cls.requires) > 1:
            raise UserError(f"policy '{name}' requires {', '.join(cls.requires)}: its fast path declares no "
                            "workloads of its own (FastPath(workloads=…)), and the synthetic ones give profiles only")
        make = lambda k: synthetic(k, fp.configs)  # noqa: E731
    before = fastpath.digest_of(fastpath.sources(cls))
    _EVIDENCE.pop((name, before), None)  # this verification's own comparisons only
    for k in range(workloads):
        kw = dict(make(k))
        engine = kw.pop("engine", None) or EngineConfig()
        ref = simulate(policy=name, engine=dataclasses.replace(engine, path="reference"), **kw)
        with comparing():
            fast = simulate(policy=name, engine=dataclasses.replace(engine, path="fast"), **kw)
        try:
            compare(ref, fast, by="shepherd verify")
        except Disagreement as exc:
            raise Disagreement(f"{exc} on workload {k}") from None
        if progress is not None:
            progress(k + 1)
    if fastpath.digest_of(fastpath.sources(cls)) != before:
        raise UserError(f"the verified source of '{name}' changed while it was being compared: run it again")
    ev = _EVIDENCE[(name, before)]
    return Report(name, ev.workloads, ev.requests, ev.batches, TABLES,
                  [rel for _, _, rel in fastpath.files(cls)], stamp(name, cls))
