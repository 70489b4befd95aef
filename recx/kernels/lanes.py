"""Dot products for compiled (numba) kernels, summed in eight interleaved partial sums.

A sum in strict order is one chain of dependent additions that the compiler may not reorder (no fast-math), so it
runs one element at a time. Eight partial sums (element c goes to sum c mod 8), added pairwise, then the tail of
d mod 8 in order, are independent chains that run as one vector; the order is fixed, so results do not depend on
the CPU's vector width or on the thread count.
"""

from __future__ import annotations

from recx.kernels.jit import inlined


@inlined()
def dot_rows(left, i, right, j):
    """left[i] · right[j] for 2-D arrays of equal width."""
    d = left.shape[1]
    zero = left.dtype.type(0.0)
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = zero
    c = 0
    while c + 8 <= d:
        s0 += left[i, c] * right[j, c]
        s1 += left[i, c + 1] * right[j, c + 1]
        s2 += left[i, c + 2] * right[j, c + 2]
        s3 += left[i, c + 3] * right[j, c + 3]
        s4 += left[i, c + 4] * right[j, c + 4]
        s5 += left[i, c + 5] * right[j, c + 5]
        s6 += left[i, c + 6] * right[j, c + 6]
        s7 += left[i, c + 7] * right[j, c + 7]
        c += 8
    total = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    while c < d:
        total += left[i, c] * right[j, c]
        c += 1
    return total
