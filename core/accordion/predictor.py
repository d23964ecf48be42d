"""Dropout predictor (Accordion §3.2, Algorithm 1).

Inputs: the query (its processing time ``P_t`` on ``N`` EPs, ``N`` =
the EPs its SLO requires, computed by the caller from the configurations)
and ``EP_times``, the projected finish time of every EP. The ``N`` EPs
with the earliest finish times are the candidates (line 4); the latest of
them sets the wait ``W_t`` (line 5); ``E_t = W_t + P_t`` (line 6). A
Low-priority query whose predicted end-to-end latency ``E_t − now``
exceeds ``TIME_WINDOW`` is dropped (lines 7–8); otherwise the candidates'
finish times become ``E_t`` (line 10), so the projections accumulate as
queries are accepted.

The seed prints ``E_t > TIME_WINDOW`` with absolute times; we compare the
predicted latency (``E_t − now``, with ``W_t`` no earlier than ``now``)
with the window, which is what the prose says ("the predicted end-to-end
latency (i.e. waiting time + processing time) … exceeds a specified time
window").
"""

from __future__ import annotations

from dataclasses import dataclass

HIGH, LOW = 1, 0


@dataclass(frozen=True)
class Prediction:
    drop: bool
    wait: float  #: W_t − now
    finish: float  #: E_t (absolute)
    candidates: tuple[int, ...]  #: EP indices of line 4


def predict(ep_times: list[float], now: float, n_eps: int, processing: float, priority: int,
            window: float) -> Prediction:
    """Algorithm 1 as a pure function; ``ep_times`` is not modified (see :func:`update`)."""
    if not 1 <= n_eps <= len(ep_times):
        raise ValueError(f"a query needs 1…{len(ep_times)} EPs, got {n_eps}")
    # the N earliest, ties to the lower index: sorted() is stable, so ordering the indices by time alone keeps
    # equal times in index order — the same as the key (time, index), without building a tuple per EP
    order = sorted(range(len(ep_times)), key=ep_times.__getitem__)[:n_eps]
    w = max(max(ep_times[i] for i in order), now)
    e = w + processing
    return Prediction(priority == LOW and e - now > window, w - now, e, tuple(order))


def update(ep_times: list[float], p: Prediction) -> list[float]:
    """Line 10: the candidates' finish times become ``E_t`` (a new list)."""
    out = list(ep_times)
    for i in p.candidates:
        out[i] = p.finish
    return out
