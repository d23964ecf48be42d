"""Write small files in the exact MAF 2019 / 2021 formats (helpers, not collected)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

HEADER_KEYS = ("HashOwner", "HashApp", "HashFunction", "Trigger")


def write_maf2019(path: Path, counts: np.ndarray, minutes: Sequence[int] | None = None, quote: bool = False,
                  blank_zeros: bool = False, triggers: Sequence[str] | None = None) -> Path:
    """One day file: key columns, then the given 1-based minute columns (default 1…M)."""
    counts = np.asarray(counts)
    minutes = list(minutes) if minutes is not None else list(range(1, counts.shape[1] + 1))
    q = (lambda s: f'"{s}"') if quote else (lambda s: s)
    lines = [",".join([*(q(k) for k in HEADER_KEYS), *(q(str(m)) for m in minutes)])]
    for i, row in enumerate(counts):
        trig = triggers[i] if triggers else "http"
        keys = [f"owner{i:04x}" * 4, f"app{i:04x}" * 4, f"fn{i:04x}" * 4, trig]
        vals = ["" if (blank_zeros and v == 0) else str(int(v)) for v in row]
        lines.append(",".join([*(q(k) for k in keys), *vals]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def write_maf2021(path: Path, rows: Sequence[tuple[str, str, float, float]]) -> Path:
    """Per-invocation file: app,func,end_timestamp,duration (seconds)."""
    lines = ["app,func,end_timestamp,duration"]
    lines += [f"{a},{f},{end!r},{dur!r}" for a, f, end, dur in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path
