"""The software prefetch of the compiled merge passes (core/engine/fast/prefetch.py): a real ``llvm.prefetch``
in the machine code's IR, changing no value, harmless past an array's end."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from shepherd.core.engine.fast.prefetch import prefetch


@njit
def _sum_prefetched(a, ahead):
    s = 0
    for i in range(len(a)):
        prefetch(a, i + ahead)
        s += a[i]
    return s


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.float64, np.bool_])
def test_prefetch_changes_nothing_and_is_harmless_past_the_end(dtype):
    a = (np.arange(5_000) % 7).astype(dtype)
    for ahead in (0, 16, 10_000_000):  # far past the end: a prefetch never faults
        assert _sum_prefetched(a, ahead) == a.sum()


def test_prefetch_is_an_llvm_prefetch():
    a = np.arange(10, dtype=np.int64)
    _sum_prefetched(a, 4)
    ir = _sum_prefetched.inspect_llvm(_sum_prefetched.signatures[0])
    assert "@llvm.prefetch" in ir


def test_prefetch_refuses_what_is_not_a_1d_array_and_an_integer():
    from numba.core.errors import TypingError

    @njit
    def bad(a):
        prefetch(a, 1.5)

    with pytest.raises(TypingError):
        bad(np.arange(3))
