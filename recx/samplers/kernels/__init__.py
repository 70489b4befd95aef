"""The operations samplers lean on, with torch references and CuPy kernels for CUDA.

- `alias_table.AliasTable`: drawing from a fixed discrete distribution (Walker/Vose alias method).
- `midx_draw.draw_cells_and_items`: the three-stage MIDX draw (codeword, codeword, item within the cell).
- `membership.contains`: whether (user, item) pairs are training interactions (binary search in CSR rows).

`choice.resolve_kernels` turns the run option `kernels: auto|torch|cupy` into the implementation used.
"""
