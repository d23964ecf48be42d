"""Time units.

Time is one integer unit everywhere: **microseconds** (``*_us`` columns,
``int64``). Paper constants given in milliseconds are converted at the edge,
with these helpers, so the engine never mixes units.
"""

from __future__ import annotations

import numpy as np

US_PER_MS = 1_000
US_PER_S = 1_000_000


def ms_to_us(value_ms: float) -> int:
    """Milliseconds (float) → integer microseconds, rounded to nearest."""
    return int(round(float(value_ms) * US_PER_MS))


def ms_array_to_us(values_ms: np.ndarray) -> np.ndarray:
    """Vectorised :func:`ms_to_us` returning ``int64``."""
    return np.rint(np.asarray(values_ms, dtype=np.float64) * US_PER_MS).astype(np.int64)
