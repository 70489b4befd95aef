"""Conjugate gradient on every row's normal equations, each row on its own (numba, CPU): implicit's
`least_squares_cg` (Takács et al. 2011) as recx.models.als.solve states it.

For row r, A_r z = M z + Σ_{e ∈ pos(r)} c_e (y_e · z) y_e, with M = g_r G + μ_r I (one matrix D when every row has
the same g and μ), and b_r = h_r v + Σ_e t_e y_e. From x_r: residual ρ = b_r - A_r x_r, direction p = ρ, then
`steps` times, while ‖ρ‖² > floor:  α = ‖ρ‖² / (p · A_r p),  x_r += α p,  ρ -= α A_r p,  p ← ρ + (‖ρ_new‖² / ‖ρ‖²) p.

A row reads its own neighbours' rows of Y once into cache and reuses them for all its steps, where the whole-side
torch path (solve.conjugate_gradient_rows) streams every entry's row through memory twice a step: on dense data the
difference is most of a half-step. A long row's neighbours are asked for PREFETCH_DISTANCE entries ahead
(recx.kernels.prefetch): on ML-10M the item half-step reads 60K user rows (15 MB, out of cache) at random, and the
prefetch took it from 0.64 to 0.39 s (2 threads); the user half-step, whose item table is in cache, is unchanged.
Runs of consecutive rows of equal work (`work_bounds`) run in parallel, in blocks of consecutive runs on the compute
threads (recx.kernels.in_threads: numba's `parallel=True` made the first compilation 46-75 s), each row
summed in a fixed order (dots in eight partial sums, recx.kernels.lanes), so results do not depend on the thread count
or the runs; they agree with the torch path to rounding.

The loss (recx.models.als.problem) comes from what the steps hold: row r's part of it is C_r − held_r with
held_r = Σ_e t_e (y_e · x) + ρ · x + k_r (v · x) at the final x and its CG residual ρ (x_r'A_r x_r = x·(b_r − ρ)),
where Σ_e t_e (y_e · x) = T(x_0) + Σ_k step_k T(p_k), T(z) = Σ_e t_e (y_e · z) summed in float64 beside each pass's
dot products: no pass of its own.

Shapes: x [R, d] (updated in place), indptr [R + 1], neighbours [nnz], other Y [n_other, d], matrix [d, d] (D, or
G when not uniform), gram_scale g [R], ridge μ [R], shared_scale h [R], shared v [d], extra c [nnz], target t
[nnz], zero_rows bool [R] (rows set to zero after), bounds [k + 1] (the runs: row r in run c when
bounds[c] <= r < bounds[c + 1]), loss_scale k [R] (float64), held [R] (float64, written).
"""

from __future__ import annotations

import numpy as np

from recx.kernels.in_threads import aligned, run_blocks
from recx.kernels.jit import compiled
from recx.kernels.lanes import dot_rows
from recx.kernels.prefetch import PREFETCH_DISTANCE, prefetch_whole_row


@compiled(inline="always")
def _dense_part(out, z, r, matrix, uniform, gram_scale, ridge):
    """out[r] = M z[r] (M = D, or g_r G + μ_r I). Eight columns at a time in eight local sums, each over k in order
    (the order of a column-by-column accumulation into out[r], so the same sums), which stay in a register instead of
    out[r] being stored and read back for every k."""
    d = z.shape[1]
    zero = out.dtype.type(0.0)
    i = 0
    while i + 8 <= d:
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = zero
        for k in range(d):
            zk = z[r, k]
            a0 += matrix[k, i] * zk
            a1 += matrix[k, i + 1] * zk
            a2 += matrix[k, i + 2] * zk
            a3 += matrix[k, i + 3] * zk
            a4 += matrix[k, i + 4] * zk
            a5 += matrix[k, i + 5] * zk
            a6 += matrix[k, i + 6] * zk
            a7 += matrix[k, i + 7] * zk
        out[r, i], out[r, i + 1], out[r, i + 2], out[r, i + 3] = a0, a1, a2, a3
        out[r, i + 4], out[r, i + 5], out[r, i + 6], out[r, i + 7] = a4, a5, a6, a7
        i += 8
    while i < d:
        a = zero
        for k in range(d):
            a += matrix[k, i] * z[r, k]
        out[r, i] = a
        i += 1
    if not uniform:
        for i in range(d):
            out[r, i] = gram_scale[r] * out[r, i] + ridge[r] * z[r, i]


@compiled(inline="always")
def _entry_weight(score, e, extra, target, with_target):
    """w_e = c_e s_e, or t_e - c_e s_e `with_target` (s_e = y_e · z[r])."""
    weight = extra[e] * score
    return target[e] - weight if with_target else weight


@compiled(inline="always")
def _add_entries(out, z, r, indptr, neighbours, other, extra, target, with_target):
    """out[r] += Σ_e w_e y_e over row r's entries (`_entry_weight`): one pass over the neighbours' rows, four
    entries at a time so that out[r] is read and written once per four (each element still adds the entries in
    order, so the sums are those of one entry at a time). Returns Σ_e t_e s_e in float64 (the loss's share)."""
    start, end = indptr[r], indptr[r + 1]
    target_sum = 0.0
    e = start
    while e + 4 <= end:
        for ahead in range(e + PREFETCH_DISTANCE, min(e + PREFETCH_DISTANCE + 4, end)):
            prefetch_whole_row(other, neighbours[ahead])
        j0, j1, j2, j3 = neighbours[e], neighbours[e + 1], neighbours[e + 2], neighbours[e + 3]
        s0, s1 = dot_rows(other, j0, z, r), dot_rows(other, j1, z, r)
        s2, s3 = dot_rows(other, j2, z, r), dot_rows(other, j3, z, r)
        target_sum += (np.float64(target[e]) * s0 + np.float64(target[e + 1]) * s1) + (
            np.float64(target[e + 2]) * s2 + np.float64(target[e + 3]) * s3
        )
        w0 = _entry_weight(s0, e, extra, target, with_target)
        w1 = _entry_weight(s1, e + 1, extra, target, with_target)
        w2 = _entry_weight(s2, e + 2, extra, target, with_target)
        w3 = _entry_weight(s3, e + 3, extra, target, with_target)
        for i in range(z.shape[1]):
            out[r, i] = out[r, i] + w0 * other[j0, i] + w1 * other[j1, i] + w2 * other[j2, i] + w3 * other[j3, i]
        e += 4
    while e < end:
        if e + PREFETCH_DISTANCE < end:
            prefetch_whole_row(other, neighbours[e + PREFETCH_DISTANCE])
        j = neighbours[e]
        score = dot_rows(other, j, z, r)
        target_sum += np.float64(target[e]) * score
        weight = _entry_weight(score, e, extra, target, with_target)
        for i in range(z.shape[1]):
            out[r, i] += weight * other[j, i]
        e += 1
    return target_sum


@compiled(inline="always")
def _product(
    out,
    z,
    r,
    matrix,
    uniform,
    gram_scale,
    ridge,
    shared_scale,
    shared,
    indptr,
    neighbours,
    other,
    extra,
    target,
    residual,
):
    """out[r] = A_r z[r], or `residual`: out[r] = b_r - A_r z[r] = h_r v - M z[r] + Σ_e (t_e - c_e (y_e · z[r])) y_e;
    returns Σ_e t_e (y_e · z[r]) (float64)."""
    _dense_part(out, z, r, matrix, uniform, gram_scale, ridge)
    if residual:
        for i in range(z.shape[1]):
            out[r, i] = shared_scale[r] * shared[i] - out[r, i]
    return _add_entries(out, z, r, indptr, neighbours, other, extra, target, residual)


@compiled(noalias=True)
def _cg_runs(
    x,
    indptr,
    neighbours,
    other,
    matrix,
    uniform,
    gram_scale,
    ridge,
    shared_scale,
    shared,
    extra,
    target,
    zero_rows,
    steps,
    floor,
    bounds,
    loss_scale,
    held,
    residual,
    direction,
    product,
    first_run,
    end_run,
):
    """The rows of runs first_run <= run < end_run (`residual`, `direction`, `product`: [R, d] scratch, those rows
    only written). Pass 0 of a row forms its residual ρ = b - A x (and p = ρ), each later pass A p and one step: one
    call of `_product`, so one copy of it in the compiled code (each `inline="always"` call is typed and lowered
    again: two calls, for the residual and for A p, took the first compilation from 2.9 to 5.1 s of CPU)."""
    d = x.shape[1]
    for run in range(first_run, end_run):
        for r in range(bounds[run], bounds[run + 1]):
            row_held = 0.0
            norm = x.dtype.type(0.0)
            for step_index in range(steps + 1):
                first = step_index == 0
                if first:
                    out, z = residual, x
                elif not norm > floor:
                    break
                else:
                    out, z = product, direction
                along = _product(
                    out,
                    z,
                    r,
                    matrix,
                    uniform,
                    gram_scale,
                    ridge,
                    shared_scale,
                    shared,
                    indptr,
                    neighbours,
                    other,
                    extra,
                    target,
                    first,
                )
                if first:
                    row_held = along
                    for i in range(d):
                        direction[r, i] = residual[r, i]
                    norm = dot_rows(residual, r, residual, r)
                    continue
                step = norm / dot_rows(direction, r, product, r)
                row_held += np.float64(step) * along
                for i in range(d):
                    x[r, i] += step * direction[r, i]
                    residual[r, i] -= step * product[r, i]
                new_norm = dot_rows(residual, r, residual, r)
                scale = new_norm / max(norm, floor)
                for i in range(d):
                    direction[r, i] = direction[r, i] * scale + residual[r, i]
                norm = new_norm
            if zero_rows[r]:
                for i in range(d):
                    x[r, i] = 0.0
                held[r] = 0.0
                continue
            for i in range(d):  # + ρ · x + k_r (v · x), from the final x and residual
                row_held += np.float64(x[r, i]) * (np.float64(residual[r, i]) + loss_scale[r] * np.float64(shared[i]))
            held[r] = row_held


def cg_rows(
    x,
    indptr,
    neighbours,
    other,
    matrix,
    uniform,
    gram_scale,
    ridge,
    shared_scale,
    shared,
    extra,
    target,
    zero_rows,
    steps,
    floor,
    bounds,
    loss_scale,
    held,
    threads: int = 1,
) -> None:
    """`steps` CG steps on every row (shapes: the module docstring), the runs of `bounds` split into `threads` blocks
    of consecutive runs, each on its own thread (recx.kernels.in_threads)."""
    scratch = tuple(aligned(x.shape, x.dtype) for _ in range(3))  # residual, direction, product
    system = (x, indptr, neighbours, other, matrix, uniform, gram_scale, ridge, shared_scale, shared, extra, target)
    run_blocks(
        _cg_runs, bounds.shape[0] - 1, threads, (*system, zero_rows, steps, floor, bounds, loss_scale, held, *scratch)
    )


def work_bounds(indptr: np.ndarray, d: int, n_chunks: int) -> np.ndarray:
    """Bounds [k + 1] of at most `n_chunks` runs of consecutive rows with equal work: a row's steps cost about
    d² + 2 d·len flops, so the runs split Σ (len + d/2) evenly. Consecutive rows keep the entry arrays read in
    order; equal work keeps the threads busy alike (ML-10M's item rows hold 83% of their entries in the first half:
    an even split of the rows gave one thread most of the half-step, 0.168 -> 0.112 s at 2 threads)."""
    work = indptr.astype(np.float64) + np.arange(indptr.shape[0]) * (d / 2)
    return np.unique(np.searchsorted(work, np.linspace(0.0, work[-1], n_chunks + 1)))
