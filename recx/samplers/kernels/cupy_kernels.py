"""CuPy RawKernels for CUDA tensors (imported only when the `cupy` kernels are in use).

Tensors cross between torch and CuPy without copies (DLPack) and the kernels run on torch's current stream.
"""

from __future__ import annotations

import functools

import cupy
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


def _cupy(tensor: torch.Tensor) -> cupy.ndarray:
    return cupy.from_dlpack(tensor.contiguous())


def _launch(kernel: cupy.RawKernel, count: int, args: tuple) -> None:
    if count == 0:
        return
    with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
        kernel(((count + THREADS - 1) // THREADS,), (THREADS,), args)


def alias_draw(prob: torch.Tensor, alias: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    out = torch.empty(uniforms.shape, dtype=torch.int64, device=uniforms.device)
    _launch(
        _kernel(ALIAS_SOURCE, "alias_draw"),
        out.numel(),
        (
            _cupy(prob.to(torch.float64)),
            _cupy(alias.to(torch.int64)),
            _cupy(uniforms),
            _cupy(out),
            cupy.int64(prob.numel()),
            cupy.int64(out.numel()),
        ),
    )
    return out


def csr_contains(indptr: torch.Tensor, indices: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    out = torch.empty(cols.shape, dtype=torch.bool, device=cols.device)
    _launch(
        _kernel(MEMBERSHIP_SOURCE, "csr_contains"),
        out.numel(),
        (
            _cupy(indptr.to(torch.int64)),
            _cupy(indices.to(torch.int64)),
            _cupy(rows.to(torch.int64)),
            _cupy(cols.to(torch.int64)),
            _cupy(out),
            cupy.int64(out.numel()),
        ),
    )
    return out


def midx_draw(
    log_joint: torch.Tensor,
    cumulative: torch.Tensor | None,
    cell_ptr: torch.Tensor,
    order: torch.Tensor,
    uniforms: torch.Tensor,
) -> torch.Tensor:
    """The three-stage MIDX draw, one thread per draw (see recx.samplers.kernels.midx_draw)."""
    batch, n, _ = uniforms.shape
    k = log_joint.shape[1]
    flat = log_joint.to(torch.float64).flatten(1)
    joint = torch.exp(flat - flat.max(dim=1, keepdim=True).values)
    if cumulative is None:  # equal stage-3 weights: the kernel's binary search over 0, 1, ..., M
        cumulative = torch.arange(order.numel() + 1, dtype=torch.float64, device=order.device)
    cumulative = cumulative.to(torch.float64).contiguous()
    row_stride = 0 if cumulative.ndim == 1 else cumulative.shape[1]
    out = torch.empty((batch, n), dtype=torch.int64, device=uniforms.device)
    _launch(
        _kernel(MIDX_SOURCE, "midx_draw"),
        out.numel(),
        (
            _cupy(joint),
            _cupy(cumulative),
            cupy.int64(row_stride),
            _cupy(cell_ptr.to(torch.int64)),
            _cupy(order.to(torch.int64)),
            _cupy(uniforms.to(torch.float64)),
            _cupy(out),
            cupy.int64(k),
            cupy.int64(n),
            cupy.int64(out.numel()),
        ),
    )
    return out
