"""A software prefetch for compiled (numba) kernels that update scattered rows of a large table.

A row update loop waits on memory for each row (a table of tens of MB is not in cache); asking for the row
PREFETCH_DISTANCE iterations ahead overlaps those waits. Measured on the row-wise Adagrad kernel, 4,000 random rows
of a 41K x 64 float32 table with cold caches: 490-560 µs without, 295-350 µs with a distance of 8.
`prefetch_row(array, row)` emits LLVM's prefetch intrinsic (read, high locality) for the first element of
array[row], `prefetch_whole_row(table, row)` for each cache line of a 2-D table's row; neither changes a value.
"""

from __future__ import annotations

from llvmlite import binding, ir
from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic

PREFETCH_DISTANCE = 8
_INTRINSIC = "llvm.prefetch.p0" if binding.llvm_version_info[0] >= 17 else "llvm.prefetch.p0i8"  # opaque pointers


def _prefetch(context, builder, array_type, array_value, index) -> None:
    """Emit llvm.prefetch (read, high locality, data) for the address of array[index]."""
    view = context.make_array(array_type)(context, builder, array_value)
    pointer = cgutils.get_item_pointer(context, builder, array_type, view, index)
    raw = builder.bitcast(pointer, ir.PointerType(ir.IntType(8)))
    int32 = ir.IntType(32)
    function = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [raw.type, int32, int32, int32]), _INTRINSIC
    )
    builder.call(function, [raw, ir.Constant(int32, 0), ir.Constant(int32, 3), ir.Constant(int32, 1)])


@intrinsic
def prefetch_row(typingctx, array, row):
    """Hint the CPU to load the cache line of array[row, 0] (array[row] for a vector)."""

    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        index = [args[1]] + [context.get_constant(types.intp, 0)] * (array_type.ndim - 1)
        _prefetch(context, builder, array_type, args[0], index)
        return context.get_dummy_value()

    return types.void(array, types.intp), codegen


@intrinsic
def prefetch_element(typingctx, array, row, column):
    """Hint the CPU to load the cache line of array[row, column] (a 2-D array)."""

    def codegen(context, builder, signature, args):
        _prefetch(context, builder, signature.args[0], args[0], [args[1], args[2]])
        return context.get_dummy_value()

    return types.void(array, types.intp, types.intp), codegen


CACHE_LINE = 64  # bytes


@njit(inline="always")
def prefetch_whole_row(table, row):
    """Hint the CPU to load every cache line of table[row] (a 2-D array)."""
    for column in range(0, table.shape[1], max(1, CACHE_LINE // table.itemsize)):
        prefetch_element(table, row, column)
