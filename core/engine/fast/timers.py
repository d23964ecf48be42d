"""The timers of a compiled kernel (the clock's, :mod:`shepherd.core.engine.clock`): a binary heap of
``(time, set order, payload)`` in the columns of one ``(3, capacity)`` array, earliest time first and, at
equal times, in the order they were set (the set order is unique, so the pop order is the clock's whatever
the heap's shape). The caller keeps the count and makes room before a push.
"""

from __future__ import annotations

from numba import njit


@njit(cache=True, inline='always')
def push(h, size, at, seq, payload):
    """Add a timer to the heap ``h`` of ``size`` timers (it has room for one more): sift up from the end."""
    k = size
    while k > 0:
        par = (k - 1) >> 1
        if h[0, par] < at or (h[0, par] == at and h[1, par] < seq):
            break
        h[0, k], h[1, k], h[2, k] = h[0, par], h[1, par], h[2, par]
        k = par
    h[0, k], h[1, k], h[2, k] = at, seq, payload


@njit(cache=True, inline='always')
def pop(h, size):
    """Remove the earliest timer (``h[:, 0]``: read it first) from the heap of ``size``: sift the last one down
    from the root."""
    size -= 1
    at, seq, payload = h[0, size], h[1, size], h[2, size]
    k = 0
    while True:
        c = 2 * k + 1
        if c >= size:
            break
        if c + 1 < size and (h[0, c + 1] < h[0, c] or (h[0, c + 1] == h[0, c] and h[1, c + 1] < h[1, c])):
            c += 1
        if h[0, c] > at or (h[0, c] == at and h[1, c] > seq):
            break
        h[0, k], h[1, k], h[2, k] = h[0, c], h[1, c], h[2, c]
        k = c
    h[0, k], h[1, k], h[2, k] = at, seq, payload
