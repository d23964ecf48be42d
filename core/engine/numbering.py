"""The canonical batch numbering's row moves (issue 30 item 1; :meth:`.recorder.Recorder.canonical_batch_ids`):
which rows of a batch table move to put it in (start, worker) order, and the batch ids that follow them."""

from __future__ import annotations

import numpy as np


def canonical_moves(start: np.ndarray, worker: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The rows of a batch table that move to sort it by (start, worker), stably: (their new positions, the rows
    that go there), or None when it is sorted already."""
    step = np.diff(start)
    if (step >= 0).all() and (np.diff(worker)[step == 0] >= 0).all():
        return None
    top = int(worker.max()) + 1
    if int(start.max()) < (1 << 62) // max(top, 1):  # one int64 key
        return misplaced(start * top + worker)
    order = np.lexsort((worker, start))  # pragma: no cover - a start past 2^62 / workers µs
    moved = np.flatnonzero(order != np.arange(len(order)))
    return moved, order[moved]


def misplaced(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A stable sort of ``key`` as the rows that move: (their new positions, the rows that go there), both
    ascending by new position. A row is in place when every row before it has a key ≤ its own and every row
    after it ≥ (prefix maximum, suffix minimum); the in-place rows split the rest into blocks whose keys lie
    between theirs, so one stable sort of the misplaced rows alone puts each in its place. Nearly sorted keys
    (a one-group run: a few hundred rows in a million) need no sort of the whole table."""
    n = len(key)
    ok = np.ones(n, np.bool_)
    bound = np.maximum.accumulate(key)
    ok[1:] &= key[1:] >= bound[:-1]
    np.minimum.accumulate(key[::-1], out=bound[::-1])
    ok[:-1] &= key[:-1] <= bound[1:]
    moved = np.flatnonzero(~ok)
    return moved, moved[np.argsort(key[moved], kind="stable")]


def renumbered(ids: np.ndarray, src: np.ndarray, moved: np.ndarray, n: int) -> np.ndarray:
    """``ids`` (batch ids, −1 for none) with batch ``src[i]`` renamed ``moved[i]``: a lookup of the touched
    ids only when few moved, else one table over every batch."""
    if len(moved) * 8 > n:
        remap = np.append(np.arange(n, dtype=np.int64), -1)
        remap[src] = moved
        return remap[ids]
    touched = np.zeros(n + 1, np.bool_)
    touched[src] = True
    hit = np.flatnonzero(touched[ids])
    by_src = np.argsort(src)
    ids[hit] = moved[by_src][np.searchsorted(src[by_src], ids[hit])]
    return ids
