"""Columns kept between the chunks of a chunked run, in memory reused from chunk to chunk (issue 43).

The fast wing's chunked mode (:mod:`shepherd.core.engine.fast.stream`) hands its kernel a *window*: the
requests still in flight, then the next chunk. Building each window as new arrays costs a page fault per page
(≈ 0.02 CPU-s a chunk of a million requests); :func:`slide` moves what is kept to the front of arrays it keeps
instead and writes the new chunk after it — the same values and types as new arrays. Nothing here knows a
kernel: columns in, columns out.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def read_only(col: np.ndarray) -> np.ndarray:
    """A read-only view of a trace column (no copy). numba compiles a function once per argument type, and a
    read-only array is a type apart: a trace read from a file hands read-only columns, a chunked window
    writable ones — without this, one kernel compiled twice (issue 43: Flex's second compile, ~25–40 s cold,
    for ``--record all`` after ``--record summary``). The kernels only read these columns."""
    view = col.view()
    view.flags.writeable = False
    return view


def slide(cols: Sequence[np.ndarray], room: list, delta: int, fresh: tuple, fill: Sequence,
          spare: int) -> tuple[list[np.ndarray], list]:
    """The next window: ``cols`` less their first ``delta`` rows, then the new chunk — ``fresh`` for the first
    ``len(fresh)`` columns (handed read-only), ``fill[j]`` for every later column ``j`` — laid out in ``room``
    (the arrays of the previous call; grown, by a quarter plus ``spare`` rows, when the window outgrows them).
    A caller uses what it keeps of a window before the next call. Returns the window's columns and the room."""
    kept = len(cols[0]) - delta
    size, given = kept + len(fresh[0]), len(fresh)
    if size > len(room[0]):  # the first chunk, or more in flight than ever: larger arrays, the kept ones first
        room, delta = [np.concatenate((c[delta:], np.empty(size // 4 + spare + size - kept, c.dtype)))
                       for c in cols], 0
    for j, col in enumerate(room):
        col[:kept] = col[delta:delta + kept]  # (overlapping: numpy copies as if through a buffer)
        col[kept:size] = fresh[j] if j < given else fill[j]
    return [read_only(c[:size]) if j < given else c[:size] for j, c in enumerate(room)], room
