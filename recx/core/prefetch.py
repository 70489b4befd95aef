"""A software prefetch for compiled (numba) kernels that update scattered rows of a large table.

A row update loop waits on memory for each row (a table of tens of MB is not in cache); asking for the row
PREFETCH_DISTANCE iterations ahead overlaps those waits. Measured on the row-wise Adagrad kernel, 4,000 random rows
of a 41K x 64 float32 table with cold caches: 490-560 µs without, 295-350 µs with a distance of 8.
`prefetch_row(array, row)` emits LLVM's prefetch intrinsic (read, high locality) for the first element of
array[row]; it changes no value.
"""

from __future__ import annotations

from llvmlite import binding, ir
from numba.core import cgutils, types
from numba.extending import intrinsic

PREFETCH_DISTANCE = 8
_INTRINSIC = "llvm.prefetch.p0" if binding.llvm_version_info[0] >= 17 else "llvm.prefetch.p0i8"  # opaque pointers


@intrinsic
def prefetch_row(typingctx, array, row):
    """Hint the CPU to load the cache line of array[row, 0] (array[row] for a vector)."""

    def codegen(context, builder, signature, args):
        array_value, row_value = args
        array_type = signature.args[0]
        view = context.make_array(array_type)(context, builder, array_value)
        index = [row_value] + [context.get_constant(types.intp, 0)] * (array_type.ndim - 1)
        pointer = cgutils.get_item_pointer(context, builder, array_type, view, index)
        raw = builder.bitcast(pointer, ir.PointerType(ir.IntType(8)))
        int32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [raw.type, int32, int32, int32]), _INTRINSIC
        )
        builder.call(function, [raw, ir.Constant(int32, 0), ir.Constant(int32, 3), ir.Constant(int32, 1)])
        return context.get_dummy_value()

    return types.void(array, types.intp), codegen
