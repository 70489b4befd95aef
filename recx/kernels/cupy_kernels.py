"""CuPy RawKernels for CUDA tensors (imported only when the `cupy` kernels are in use).

Kernels take the tensors' device pointers (no copy, no DLPack view) and run on torch's current stream.
"""

from __future__ import annotations

import functools
import warnings

import cupy
import numpy
import torch

THREADS = 256

ALIAS_SOURCE = r"""
extern "C" __global__ void alias_draw(const double* prob, const long long* alias, const double* uniforms,
                                      long long* out, long long n, long long count) {
    long long t = (long long)blockDim.x * blockIdx.x + threadIdx.x;
    if (t >= count) return;
    double scaled = uniforms[t] * (double)n;
    long long bucket = (long long)scaled;
    if (bucket > n - 1) bucket = n - 1;
    out[t] = (scaled - (double)bucket < prob[bucket]) ? bucket : alias[bucket];
}
"""

MEMBERSHIP_SOURCE = r"""
extern "C" __global__ void csr_contains(const long long* indptr, const long long* indices, const long long* rows,
                                        const long long* cols, bool* out, long long count) {
    long long t = (long long)blockDim.x * blockIdx.x + threadIdx.x;
    if (t >= count) return;
    long long lo = indptr[rows[t]], hi = indptr[rows[t] + 1], col = cols[t];
    while (lo < hi) {
        long long mid = lo + (hi - lo) / 2;
        if (indices[mid] < col) lo = mid + 1; else hi = mid;
    }
    out[t] = lo < indptr[rows[t] + 1] && indices[lo] == col;
}
"""

MIDX_SOURCE = r"""
extern "C" __global__ void midx_draw(const double* joint, const double* cumulative, long long row_stride,
                                     const long long* cell_ptr, const long long* order, const double* uniforms,
                                     long long* out, long long k, long long n, long long count) {
    long long t = (long long)blockDim.x * blockIdx.x + threadIdx.x;
    if (t >= count) return;
    long long b = t / n;
    const double* J = joint + b * k * k;
    const double* u = uniforms + 3 * t;
    double total = 0.0;
    for (long long i = 0; i < k; ++i) {  // summed row by row, as `running` below: it reaches `total` exactly
        double row = 0.0;
        for (long long j = 0; j < k; ++j) row += J[i * k + j];
        total += row;
    }
    double target = fmin(u[0] * total, nextafter(total, 0.0)), running = 0.0;
    long long k1 = k - 1;
    for (long long i = 0; i < k; ++i) {
        double row = 0.0;
        for (long long j = 0; j < k; ++j) row += J[i * k + j];
        running += row;
        if (running > target) { k1 = i; break; }
    }
    double row_total = 0.0;
    for (long long j = 0; j < k; ++j) row_total += J[k1 * k + j];
    target = fmin(u[1] * row_total, nextafter(row_total, 0.0)); running = 0.0;
    long long k2 = k - 1;
    for (long long j = 0; j < k; ++j) {
        running += J[k1 * k + j];
        if (running > target) { k2 = j; break; }
    }
    long long cell = k1 * k + k2, start = cell_ptr[cell], end = cell_ptr[cell + 1];
    const double* C = cumulative + b * row_stride;
    target = fmin(C[start] + u[2] * (C[end] - C[start]), nextafter(C[end], 0.0));
    long long lo = start, hi = end - 1;
    while (lo < hi) {
        long long mid = lo + (hi - lo) / 2;
        if (C[mid + 1] > target) hi = mid; else lo = mid + 1;
    }
    out[t] = order[lo];
}
"""


@functools.cache
def _kernel(source: str, name: str) -> cupy.RawKernel:
    return cupy.RawKernel(source, name)


@functools.cache
def _stream(pointer: int) -> cupy.cuda.ExternalStream:
    """CuPy's handle on a torch stream, made once per stream (CuPy 14 deprecates ExternalStream for
    Stream.from_external, which CuPy 13 lacks: the `gpu` extra takes either)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return cupy.cuda.ExternalStream(pointer)


def _launch(kernel: cupy.RawKernel, count: int, arguments: tuple[torch.Tensor | int, ...]) -> None:
    """Run `kernel` over `count` threads on torch's current stream; a tensor argument is passed as its device pointer,
    an int as int64. Pointers, not DLPack views: a view per argument cost more than the kernel (an H200 ran the alias
    draw's torch reference in 96 us, its CuPy kernel through DLPack views in 153 us). The tensors are held until the
    launch is queued; their memory is reused only by later work on the same stream."""
    if count == 0:
        return
    held = [value.contiguous() if isinstance(value, torch.Tensor) else value for value in arguments]
    passed = [numpy.uint64(v.data_ptr()) if isinstance(v, torch.Tensor) else numpy.int64(v) for v in held]
    with _stream(torch.cuda.current_stream().cuda_stream):
        kernel(((count + THREADS - 1) // THREADS,), (THREADS,), tuple(passed))


def alias_draw(prob: torch.Tensor, alias: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    out = torch.empty(uniforms.shape, dtype=torch.int64, device=uniforms.device)
    arguments = (prob.to(torch.float64), alias.to(torch.int64), uniforms.to(torch.float64), out)
    _launch(_kernel(ALIAS_SOURCE, "alias_draw"), out.numel(), (*arguments, prob.numel(), out.numel()))
    return out


def csr_contains(indptr: torch.Tensor, indices: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    out = torch.empty(cols.shape, dtype=torch.bool, device=cols.device)
    arguments = (indptr.to(torch.int64), indices.to(torch.int64), rows.to(torch.int64), cols.to(torch.int64), out)
    _launch(_kernel(MEMBERSHIP_SOURCE, "csr_contains"), out.numel(), (*arguments, out.numel()))
    return out


def midx_draw(
    log_joint: torch.Tensor,
    cumulative: torch.Tensor | None,
    cell_ptr: torch.Tensor,
    order: torch.Tensor,
    uniforms: torch.Tensor,
) -> torch.Tensor:
    """The three-stage MIDX draw, one thread per draw (see recx.kernels.midx_draw)."""
    batch, n, _ = uniforms.shape
    k = log_joint.shape[1]
    flat = log_joint.to(torch.float64).flatten(1)
    joint = torch.exp(flat - flat.max(dim=1, keepdim=True).values)
    if cumulative is None:  # equal stage-3 weights: the kernel's binary search over 0, 1, ..., M
        cumulative = torch.arange(order.numel() + 1, dtype=torch.float64, device=order.device)
    cumulative = cumulative.to(torch.float64)
    row_stride = 0 if cumulative.ndim == 1 else cumulative.shape[1]
    out = torch.empty((batch, n), dtype=torch.int64, device=uniforms.device)
    pointers = (cell_ptr.to(torch.int64), order.to(torch.int64), uniforms.to(torch.float64), out)
    _launch(
        _kernel(MIDX_SOURCE, "midx_draw"), out.numel(), (joint, cumulative, row_stride, *pointers, k, n, out.numel())
    )
    return out
