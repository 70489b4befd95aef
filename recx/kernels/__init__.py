"""recx's compiled routines, each beside its torch reference and tested against it: numba kernels for the CPU
(`jit.compiled`, cached on disk) and CuPy kernels for CUDA (`cupy_kernels`, chosen by the run setting
`kernels: auto|torch|cupy` through `choice.resolve_kernels`).

- `optimizer_rows`: the row-sparse optimizers' step (lazy Adam, row-wise Adagrad, SGD) on a row-sparse gradient.
- `bpr_rows`: BPR forward and backward over the rows a step reads.
- `row_dots`: each query's scores against its own few rows.
- `conjugate_gradient`: conjugate gradient on every row's normal equations (ALS).
- `alias_table`, `inverse_cdf`, `midx_draw`, `membership`, `cluster_sums`: the operations samplers lean on.
- `jit`, `lanes`, `prefetch`, `row_occurrences`, `in_threads`: what the numba kernels share.
"""
