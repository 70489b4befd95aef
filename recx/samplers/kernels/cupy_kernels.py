"""CuPy RawKernels for CUDA tensors (imported only when the `cupy` backend is in use).

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
    _launch(_kernel(ALIAS_SOURCE, "alias_draw"), out.numel(),
            (_cupy(prob.to(torch.float64)), _cupy(alias.to(torch.int64)), _cupy(uniforms), _cupy(out),
             cupy.int64(prob.numel()), cupy.int64(out.numel())))
    return out


def csr_contains(indptr: torch.Tensor, indices: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    out = torch.empty(cols.shape, dtype=torch.bool, device=cols.device)
    _launch(_kernel(MEMBERSHIP_SOURCE, "csr_contains"), out.numel(),
            (_cupy(indptr.to(torch.int64)), _cupy(indices.to(torch.int64)), _cupy(rows.to(torch.int64)),
             _cupy(cols.to(torch.int64)), _cupy(out), cupy.int64(out.numel())))
    return out
