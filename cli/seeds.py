"""The seed options, one meaning everywhere (STYLE.md pattern 16).

* ``--seed S`` — the base seed (default 0);
* ``--replicas N`` — N replicas, seeds S … S+N−1;
* ``--seeds a,b,c`` — an explicit list (duplicates refused: a seed counted twice is not a replica).

:func:`seed_list` merges them into the list of seeds a command runs, or None
when none was given (the command's config then decides); :func:`replica_count`
is the same for a command whose seeds are always 0 … N−1 (``reproduce``).
"""

from __future__ import annotations

import sys

from shepherd.core.errors import UserError

SEED_HELP = "Base seed S (default 0); with --replicas N the seeds are S … S+N−1."
REPLICAS_HELP = "Number of replicas N (seeds S … S+N−1), each a real replica (a named trace rebuilt per seed; " \
                "a trace file re-drawn per seed with trace.redraw_window_s)."
SEEDS_HELP = "Explicit comma-separated seeds (e.g. 0,1,2); not with --seed/--replicas."
MAX_REPLICAS = 1000


def parse_seeds(text: str) -> list[int]:
    """``"0,1,2"`` → [0, 1, 2]: non-negative integers, no duplicates."""
    try:
        seeds = [int(s) for s in text.replace(" ", "").split(",") if s]
    except ValueError:
        raise UserError(f"--seeds expects comma-separated integers, got '{text}'") from None
    if not seeds or any(s < 0 for s in seeds):
        raise UserError(f"--seeds expects non-negative integers, got '{text}'")
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise UserError(f"--seeds repeats seed {repeated[0]}: a seed counted twice is not a replica")
    if len(seeds) > MAX_REPLICAS:
        raise UserError(f"--seeds lists {len(seeds)} seeds; at most {MAX_REPLICAS}")
    return seeds


def seed_list(seed: int | None, replicas: int | None, seeds: str | None) -> list[int] | None:
    """The seeds the options ask for, or None when none of them was given."""
    if seeds is not None:
        if seed is not None or replicas is not None:
            raise UserError("give --seeds a,b,c or --seed S [--replicas N], not both")
        return parse_seeds(seeds)
    if seed is None and replicas is None:
        return None
    base = 0 if seed is None else seed
    if base < 0:
        raise UserError(f"--seed must be ≥ 0, got {base}")
    count = 1 if replicas is None else replicas
    if not 1 <= count <= MAX_REPLICAS:
        raise UserError(f"--replicas must be between 1 and {MAX_REPLICAS}, got {count}")
    return list(range(base, base + count))


def replica_count(replicas: int | None, seeds: str | None) -> int | None:
    """N for a command whose seeds are always 0 … N−1 (``reproduce``: the papers' grids), or None.

    ``--replicas N``; or ``--seeds 0,1,…,N−1`` (the list, as everywhere; another list is refused); a bare
    ``--seeds N`` is the count it meant before (kept one release, with a one-line deprecation notice).
    """
    if seeds is not None and replicas is not None:
        raise UserError("give --replicas N or --seeds 0,1,…, not both")
    if seeds is not None and "," not in seeds and seeds.strip().isdigit():
        sys.stderr.write("warning: --seeds N as a count is deprecated and will be removed in the next release; "
                         "use --replicas N (--seeds is a list of seeds, e.g. 0,1,2)\n")
        replicas = int(seeds)
    elif seeds is not None:
        chosen = parse_seeds(seeds)
        if chosen != list(range(len(chosen))):
            raise UserError(f"--seeds {seeds}: this command runs seeds 0 … N−1; give --replicas N")
        replicas = len(chosen)
    if replicas is not None and not 1 <= replicas <= MAX_REPLICAS:
        raise UserError(f"--replicas must be between 1 and {MAX_REPLICAS}, got {replicas}")
    return replicas
