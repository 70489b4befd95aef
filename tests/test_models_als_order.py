"""The ALS models' CG products summed in a fixed order (recx.models.als.solve.OrderedProducts, used on CUDA under
deterministic algorithms): the entry scores y_j · z_r and the weighted sums Σ_j w_rj y_j equal a float64 dense
reference and torch's CSR kernels, in chunks of rows (a chunk limit below one row's entries included), with rows of no
entry; half-steps of WRMF, RG² and RG× through them (forced on the CPU) give the CSR path's factors and losses."""

from __future__ import annotations

import pytest
import torch

from recx.core.device import deterministic_algorithms
from recx.core.device_paths import forced_accelerator_branches
from recx.data.csr import CSR
from recx.models import segments
from recx.models.als import solve
from recx.models.registry import MODELS

N_USERS, N_ITEMS, DIM = 40, 30, 6
CASES = {
    "wrmf": ("wrmf", {"alpha": 3.0, "regularization": 0.2}),
    "rg2-official": ("rg2", {}),
    "rgx-eq18": ("rgx", {"weights": "eq18", "form": "text", "n_negatives": 3, "regularization": 0.05}),
}


def training_matrix(seed: int = 0) -> CSR:
    """Random users × items; the last 3 users and the last 2 items have no entry (empty rows on both sides)."""
    generator = torch.Generator().manual_seed(seed)
    dense = torch.rand(N_USERS, N_ITEMS, generator=generator) < 0.3
    dense[-3:] = False
    dense[:, -2:] = False
    rows, cols = dense.nonzero(as_tuple=True)
    return CSR.from_pairs(rows, cols, N_USERS, N_ITEMS)


def make_model(case: str, dtype: str, **extra):
    name, args = CASES[case]
    model_class = MODELS.get(name)
    torch.manual_seed(0)
    return model_class(N_USERS, N_ITEMS, DIM, model_class.Args(dtype=dtype, init_scale=1.0, **args, **extra))


def both_systems(dtype: str) -> list[solve.RowSystem]:
    model = make_model("wrmf", dtype)
    problem = model.weighted_squares(training_matrix())
    return [problem.user_system(model.item_factors.data), problem.item_system(model.user_factors.data)]


def dense_weights(system: solve.RowSystem, values: torch.Tensor) -> torch.Tensor:
    """The [R, n_other] matrix with `values` at the system's entries (row r, neighbour j), in float64."""
    lengths = system.indptr[1:] - system.indptr[:-1]
    rows = torch.repeat_interleave(torch.arange(lengths.numel()), lengths)
    dense = torch.zeros(lengths.numel(), system.other.shape[0], dtype=torch.float64)
    dense[rows, system.neighbours] = values.double()
    return dense


@pytest.mark.parametrize("chunk_entries", [1, 7, 64, 2**20])
@pytest.mark.parametrize("side", [0, 1], ids=["users", "items"])
def test_ordered_products_equal_a_float64_reference_and_the_csr_kernels(monkeypatch, chunk_entries, side):
    monkeypatch.setattr(segments, "CHUNK_ENTRIES", chunk_entries)
    system = both_systems("float64")[side]
    ordered, csr = solve.OrderedProducts(system), solve.CsrProducts(system)
    nnz = system.neighbours.numel()
    assert sum(end - first for _, _, first, end in ordered.rows.chunks) == nnz
    assert (len(ordered.rows.chunks) == 1) == (chunk_entries == 2**20)
    generator = torch.Generator().manual_seed(side)
    z = torch.randn(system.indptr.numel() - 1, DIM, dtype=torch.float64, generator=generator)
    weights = torch.randn(nnz, dtype=torch.float64, generator=generator)
    pattern = dense_weights(system, torch.ones(nnz))
    reference_scores = (z @ system.other.T)[pattern > 0]  # row-major: the entries' order
    reference_sums = dense_weights(system, weights) @ system.other
    assert (reference_sums.abs().sum(1) == 0).sum() == (3 if side == 0 else 2)  # the empty rows
    torch.testing.assert_close(ordered.entry_scores(z), reference_scores, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(
        ordered.weighted_sum(weights, torch.empty_like(z)), reference_sums, rtol=1e-12, atol=1e-12
    )
    torch.testing.assert_close(ordered.entry_scores(z), csr.entry_scores(z).clone(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(
        ordered.weighted_sum(weights, torch.empty_like(z)), csr.weighted_sum(weights, torch.empty_like(z))
    )


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype, tolerance", [("float64", 1e-10), ("float32", 1e-4)])
def test_half_steps_through_the_ordered_products_equal_the_csr_path(monkeypatch, case, dtype, tolerance):
    """Two iterations of both half-steps on the accelerator branch (forced on the CPU), through torch's CSR kernels
    and through OrderedProducts (in chunks of 16 entries): the same factors and recorded losses."""
    monkeypatch.setattr(segments, "CHUNK_ENTRIES", 16)
    built, ordered_products = [], solve.OrderedProducts

    def counted(system):
        built.append(system)
        return ordered_products(system)

    monkeypatch.setattr(solve, "OrderedProducts", counted)
    results = []
    for fixed_order in (False, True):
        monkeypatch.setattr(solve, "in_fixed_order", lambda x, fixed_order=fixed_order: fixed_order)
        model = make_model(case, dtype, solver="cg", cg_steps=3)
        problem = model.weighted_squares(training_matrix(1))
        losses = []
        with forced_accelerator_branches():
            for _ in range(2):
                losses += [model.solve_users(problem), model.solve_items(problem)]
        results.append((model.user_factors.data.clone(), model.item_factors.data.clone(), torch.stack(losses)))
    assert len(built) == 4  # every half-step of the second pass took the ordered products
    assert results[0][1].abs().max() > 0.05
    for csr_path, ordered_path in zip(results[0], results[1], strict=True):
        torch.testing.assert_close(ordered_path, csr_path, rtol=tolerance, atol=tolerance)


def test_the_cpu_keeps_the_csr_path_under_deterministic_algorithms():
    """`deterministic: true` changes nothing on the CPU: in_fixed_order is false for a CPU tensor in that mode."""
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        assert not solve.in_fixed_order(torch.zeros(2, 2))
    finally:
        torch.use_deterministic_algorithms(before)


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES))
def test_cuda_half_steps_under_deterministic_algorithms_repeat_and_equal_the_cpu(case):
    """On CUDA under deterministic algorithms the CG takes the ordered products, two runs from one start end with
    the same factors bit for bit, and those equal the CPU's (float64)."""
    results = []
    for device in ("cpu", "cuda", "cuda"):
        model = make_model(case, "float64", solver="cg").to(device)
        with deterministic_algorithms(True, torch.device(device)):
            assert solve.in_fixed_order(model.user_factors.data) == (device == "cuda")
            problem = model.weighted_squares(training_matrix(2).to(device))
            for _ in range(2):
                model.solve_users(problem)
                model.solve_items(problem)
        results.append((model.user_factors.data.cpu(), model.item_factors.data.cpu()))
    assert all(torch.equal(first, second) for first, second in zip(results[1], results[2], strict=True))
    for cuda, cpu in zip(results[1], results[0], strict=True):
        torch.testing.assert_close(cuda, cpu, rtol=1e-9, atol=1e-9)
