"""A software prefetch for compiled loops that read many slow streams at once (issue 18).

The merge of several serving groups' runs (:mod:`.unit_merge`, :func:`.replay.gather_shared`) reads each
group's part of a column in order, but the groups in turn: dozens of streams, each advancing a row every few
dozen steps — more than a hardware prefetcher follows, so nearly every new cache line of every stream is a
trip to memory (measured on the served benchmark's 1M requests on 400 workers in 34 groups: visiting the
groups' batch-log rows in the merged order took 15 ms, 7 ms with the rows a few lines ahead prefetched).
:func:`prefetch` asks for ``a[i]``'s cache line without waiting for it; an index past the array's end is
harmless (a prefetch never faults) and the call changes no value.
"""

from __future__ import annotations

from llvmlite import ir
from llvmlite.binding import llvm_version_info
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_I32 = ir.IntType(32)


@intrinsic
def prefetch(typingctx, arr, idx):
    """``prefetch(a, i)``: bring the cache line of ``a[i]`` (a 1-D array) towards the core, for reading,
    into every cache level (LLVM's ``llvm.prefetch``, locality 3)."""
    if not isinstance(arr, types.Array) or arr.ndim != 1 or not isinstance(idx, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        ptr = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(8).as_pointer())  # not "inbounds": the
        # index may lie past the end; LLVM 15 and later name the intrinsic by its opaque pointer
        name = "llvm.prefetch.p0" if llvm_version_info >= (15,) else "llvm.prefetch.p0i8"
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [ptr.type, _I32, _I32,
                                                                                           _I32]), name)
        builder.call(fn, [ptr, ir.Constant(_I32, 0), ir.Constant(_I32, 3), ir.Constant(_I32, 1)])
        return context.get_dummy_value()

    return types.void(arr, idx), codegen
