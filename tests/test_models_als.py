"""ALS models (WRMF, RG², RG×): each half-step is the exact minimiser of the model's loss (against a dense float64
Newton step on the loss written from the papers' formulas), CG reaches it, losses never increase, chunking does
not change the solution. RG runs in form text here (one loss for both half-steps); its official form, whose item
half-step minimises no common loss, is checked against the authors' code in tests/test_official_rg.py."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest
import torch

from recx.config.run_config import resolve
from recx.core.device_paths import forced_accelerator_branches
from recx.core.errors import RecxError
from recx.core.progress import make_progress
from recx.data.csr import CSR
from recx.kernels.conjugate_gradient import work_bounds
from recx.models.als import layout
from recx.models.als import problem as problem_module
from recx.models.als import solve as solve_module
from recx.models.als.base import DTYPES
from recx.models.als.layout import chunk_bounds, padded_chunks
from recx.models.als.solve import solve_rows
from recx.models.registry import MODELS
from recx.runs.train_run import train_run

N_USERS, N_ITEMS, DIM = 12, 9, 3
CASES = {
    "wrmf": ("wrmf", {"alpha": 3.0, "regularization": 0.2}),
    "wrmf-scaled": ("wrmf", {"alpha": 3.0, "regularization": 0.2, "confidence": "scaled"}),
    "rg2-eq16": ("rg2", {"weights": "eq16", "form": "text", "regularization": 0.05}),
    "rg2-eq18": ("rg2", {"weights": "eq18", "form": "text", "n_negatives": 3, "regularization": 0.05}),
    "rg2-hyper": ("rg2", {"weights": "hyper", "form": "text", "alpha": 0.3, "beta": 0.5, "regularization": 0.1}),
    "rgx-eq16": ("rgx", {"weights": "eq16", "form": "text", "regularization": 0.05}),
    "rgx-eq18": ("rgx", {"weights": "eq18", "form": "text", "n_negatives": 3, "regularization": 0.05}),
    "rgx-hyper": ("rgx", {"weights": "hyper", "form": "text", "alpha": 0.3, "beta": 0.5, "regularization": 0.1}),
}


def random_matrix(seed: int) -> torch.Tensor:
    """Binary users × items; every user has an item, the last item has none."""
    generator = torch.Generator().manual_seed(seed)
    dense = torch.rand(N_USERS, N_ITEMS, generator=generator) < 0.35
    dense[torch.arange(N_USERS), torch.randint(0, N_ITEMS - 1, (N_USERS,), generator=generator)] = True
    dense[:, -1] = False
    return dense


def to_csr(dense: torch.Tensor) -> CSR:
    rows, cols = dense.nonzero(as_tuple=True)
    return CSR.from_pairs(rows, cols, dense.shape[0], dense.shape[1])


def make_model(case: str, **extra):
    name, args = CASES[case]
    model_class = MODELS.get(name)
    torch.manual_seed(0)
    return model_class(N_USERS, N_ITEMS, DIM, model_class.Args(dtype="float64", init_scale=1.0, **args, **extra))


def dense_loss(case: str, R: torch.Tensor, P: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
    """The loss written densely from the papers: WRMF (Hu et al. Eq. 3) or the RG paper's Eq. 31/32 with the
    row-weighted regulariser of Eq. 36–39 (hyper: Eq. 16 / 2N + α Σ_observed (1 − o)², V_x = β |I_x| / 2N)."""
    name, args = CASES[case]
    r = R.double()
    o = P @ Q.T
    lam = args["regularization"]
    if name == "wrmf":
        extra = args["alpha"] - (1.0 if args.get("confidence") == "scaled" else 0.0)
        weight = 1 + extra * r
        return (weight * (r - o) ** 2).sum() + lam * (P.pow(2).sum() + Q.pow(2).sum())
    n = float(N_ITEMS)
    counts = r.sum(1, keepdim=True)
    target = r * n / counts - 1
    if args["weights"] == "eq16":
        weight, v = counts.expand_as(r), counts[:, 0] / n
        fit = (weight * (target - o) ** 2).sum()
    elif args["weights"] == "eq18":
        k = args["n_negatives"] + 1
        weight = torch.where(r > 0, counts, counts * k / n)
        v = counts[:, 0] * k / n**2
        fit = (weight * (target - o) ** 2).sum()
    else:
        base = counts / (2 * n)
        weight = base + args["alpha"] * r
        v = args.get("beta", 0.0) * base[:, 0]
        fit = (base * (target - o) ** 2).sum() + args["alpha"] * (r * (1 - o) ** 2).sum()
    loss = fit + lam * ((weight.sum(1) * P.pow(2).sum(1)).sum() + (weight.sum(0) * Q.pow(2).sum(1)).sum())
    if name == "rgx":
        loss = loss - (v * (o**2).sum(1)).sum()
    return loss


def newton_minimiser(loss_of, start: torch.Tensor) -> torch.Tensor:
    """argmin of a quadratic: one Newton step from `start` with the dense Hessian."""
    flat = start.flatten().clone()
    gradient = torch.autograd.functional.jacobian(lambda z: loss_of(z.view_as(start)), flat)
    hessian = torch.autograd.functional.hessian(lambda z: loss_of(z.view_as(start)), flat)
    return (flat - torch.linalg.solve(hessian, gradient)).view_as(start)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("side", ["users", "items"])
def test_half_step_is_the_exact_minimiser(case, side):
    R = random_matrix(1)
    model = make_model(case, solver="cholesky")
    problem = model.weighted_squares(to_csr(R))
    P, Q = model.user_factors.data.clone(), model.item_factors.data.clone()
    if side == "users":
        expected = newton_minimiser(lambda X: dense_loss(case, R, X, Q), P)
        model.solve_users(problem)
        got = model.user_factors.data
    else:
        expected = newton_minimiser(lambda X: dense_loss(case, R, P, X), Q)
        model.solve_items(problem)
        got = model.item_factors.data
    torch.testing.assert_close(got, expected, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("case", ["wrmf", "rg2-eq16", "rg2-eq18", "rgx-eq16", "rgx-eq18"])
def test_loss_equals_the_dense_loss(case):
    R = random_matrix(2)
    model = make_model(case)
    problem = model.weighted_squares(to_csr(R))
    expected = dense_loss(case, R, model.user_factors.data, model.item_factors.data)
    torch.testing.assert_close(model.loss(problem), expected, rtol=1e-10, atol=1e-8)


HELD_CASES = {
    **CASES,
    "wrmf-implicit": ("wrmf", {"alpha": 40.0, "regularization": 0.05, "confidence": "scaled"}),
    "rg2-official": ("rg2", {}),
    "rgx-official": ("rgx", {}),
}


@pytest.mark.parametrize("case", sorted(HELD_CASES))
@pytest.mark.parametrize("dtype, tolerance", [("float64", 1e-12), ("float32", 1e-6)])
def test_the_loss_a_half_step_returns_from_its_solves_is_the_loss_pass(case, dtype, tolerance, threads_restored):
    """The host CG's loss from what its steps hold (K − Σ held + the other side's ridge) against the loss pass over
    every observed pair (`WeightedSquares.loss`, the value recorded before) after each of 8 half-steps, with 1 and 2
    threads (equal to the bit), and against the accelerator branch's (which returns the loss pass)."""
    from recx.core.threads import set_compute_threads

    generator = torch.Generator().manual_seed(11)
    dense = torch.rand(300, 200, generator=generator) < 0.06
    dense[:, -1] = False  # an item without entries: a zero row for WRMF
    name, args = HELD_CASES[case]
    returned = []
    for threads in (1, 2):
        set_compute_threads(threads)
        model_class = MODELS.get(name)
        torch.manual_seed(0)
        model = model_class(300, 200, 16, model_class.Args(dtype=dtype, cg_steps=3, **args))
        problem = model.weighted_squares(to_csr(dense))
        losses = []
        for _ in range(4):
            for solve in (model.solve_users, model.solve_items):
                losses.append(solve(problem))
                torch.testing.assert_close(losses[-1], model.loss(problem), rtol=tolerance, atol=0.0)
        returned.append(torch.stack(losses))
    assert torch.equal(returned[0], returned[1])
    torch.manual_seed(0)
    model = model_class(300, 200, 16, model_class.Args(dtype=dtype, cg_steps=3, **args))
    with forced_accelerator_branches():
        forced = model.solve_users(model.weighted_squares(to_csr(dense)))
    torch.testing.assert_close(forced, returned[0][0], rtol=10 * tolerance, atol=0.0)


@pytest.fixture
def threads_restored():
    import numba

    from recx.core.threads import set_compute_threads

    before = torch.get_num_threads()
    yield
    set_compute_threads(before)
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)


@pytest.mark.parametrize("case", ["wrmf", "rg2-hyper", "rgx-eq18"])
def test_conjugate_gradient_reaches_the_exact_solution(case):
    R = random_matrix(3)
    exact, iterative = make_model(case, solver="cholesky"), make_model(case, solver="cg", cg_steps=DIM)
    for model in (exact, iterative):
        problem = model.weighted_squares(to_csr(R))
        model.solve_users(problem)
        model.solve_items(problem)
    torch.testing.assert_close(iterative.item_factors.data, exact.item_factors.data, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("solver", ["cholesky", "cg"])
def test_loss_never_increases(case, solver):
    R = random_matrix(4)
    model = make_model(case, solver=solver, cg_steps=2)
    problem = model.weighted_squares(to_csr(R))
    losses = [float(model.loss(problem))]
    for _ in range(8):
        for solve in (model.solve_users, model.solve_items):
            solve(problem)
            losses.append(float(model.loss(problem)))
    steps = torch.tensor(losses).diff()
    assert (steps <= 1e-9 * abs(losses[0])).all(), losses
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("case", ["wrmf", "rg2-eq18", "rgx-hyper"])
@pytest.mark.parametrize("dtype, tolerance", [("float64", 1e-10), ("float32", 2e-5)])
def test_each_row_cg_kernel_equals_the_whole_side_cg(case, dtype, tolerance):
    """The host branch's compiled CG (a row at a time) against the torch CG over the whole side (the accelerator
    branch, forced on the CPU), from the same start, over two iterations of both half-steps."""
    R = random_matrix(9)
    results = []
    for forced in (False, True):
        model = make_model(case, solver="cg", cg_steps=2)
        model.user_factors.data = model.user_factors.data.to(DTYPES[dtype])
        model.item_factors.data = model.item_factors.data.to(DTYPES[dtype])
        model.args.dtype = dtype
        problem = model.weighted_squares(to_csr(R))
        with forced_accelerator_branches() if forced else contextlib.nullcontext():
            for _ in range(2):
                model.solve_users(problem)
                model.solve_items(problem)
        results.append((model.user_factors.data.clone(), model.item_factors.data.clone()))
    assert results[0][1].abs().max() > 0.05
    for kernel, torch_path in zip(results[0], results[1], strict=True):
        torch.testing.assert_close(kernel, torch_path, rtol=tolerance, atol=tolerance)


def test_work_bounds_split_consecutive_rows_into_runs_of_equal_work():
    """Skewed rows (most entries in the first rows, as ML-10M's items): every row in exactly one run of consecutive
    rows, runs in order, and each run's work Σ (len + d/2) within one row's work of the even share."""
    lengths = np.concatenate([np.full(20, 500), np.full(980, 5)])
    indptr = np.concatenate([[0], lengths.cumsum()])
    bounds = work_bounds(indptr, 64, 8)
    assert bounds[0] == 0 and bounds[-1] == lengths.size and (np.diff(bounds) > 0).all()
    work = np.array([(lengths[start:end] + 32).sum() for start, end in zip(bounds[:-1], bounds[1:], strict=True)])
    assert len(work) == 8 and np.abs(work - work.sum() / 8).max() <= (lengths + 32).max()
    assert bounds[1] <= 12  # the first eighth of the work ends in the long rows (an even split of the rows: 125)
    assert list(work_bounds(np.zeros(4, dtype=np.int64), 2, 16)) == [0, 1, 2, 3]  # more runs than rows


@pytest.mark.parametrize("n_chunks", [1, 3, 64])
def test_the_cg_kernels_result_does_not_depend_on_its_runs(n_chunks, monkeypatch):
    """The same rows solved in one run, a few, or one run per row: equal to the bit."""
    R = random_matrix(9)
    results = []
    for chunks_per_thread in (1, n_chunks):
        monkeypatch.setattr(solve_module, "CHUNKS_PER_THREAD", chunks_per_thread)
        model = make_model("wrmf", solver="cg", cg_steps=2)
        problem = model.weighted_squares(to_csr(R))
        model.solve_users(problem)
        model.solve_items(problem)
        results.append((model.user_factors.data.clone(), model.item_factors.data.clone()))
    for ours, theirs in zip(results[0], results[1], strict=True):
        assert torch.equal(ours, theirs)


def test_batched_solves_equal_per_row_solves():
    R = random_matrix(5)
    model = make_model("rgx-eq18", solver="cholesky")
    problem = model.weighted_squares(to_csr(R))
    system = problem.user_system(model.item_factors.data)
    together = model.user_factors.data.clone()
    solve_rows(together, system, padded_chunks(problem.users.indptr, max_slots=10**6), "cholesky")
    one_by_one = model.user_factors.data.clone()
    per_row = padded_chunks(problem.users.indptr, max_slots=1, max_rows=1)
    assert len(per_row) == N_USERS
    solve_rows(one_by_one, system, per_row, "cholesky")
    torch.testing.assert_close(together, one_by_one, rtol=1e-12, atol=1e-12)


def test_accelerator_chunks_are_fewer_and_solve_the_same(monkeypatch):
    """On the accelerator branch a half-step solves in chunks as large as its memory bound allows (fewer launches:
    layout.chunk_budget) and the loss scores its entries in as large chunks (problem.loss_chunk); the factors and
    losses are the host branch's, whose small chunks are forced smaller still here so that the two differ."""
    monkeypatch.setattr(layout, "HOST_BUDGET", (8, 2))
    monkeypatch.setattr(problem_module, "LOSS_CHUNK", 5)
    results = {}
    for forced in (False, True):
        model = make_model("rgx-eq18", solver="cholesky")
        problem = model.weighted_squares(to_csr(random_matrix(7)))
        with forced_accelerator_branches() if forced else contextlib.nullcontext():
            losses = torch.stack([model.solve_users(problem), model.solve_items(problem)])
            chunks = problem.users.chunks(model.user_factors.data), problem.items.chunks(model.item_factors.data)
            assert layout.chunk_budget(model.user_factors.data) == (
                ((layout.ACCELERATOR_GATHERED // DIM, layout.ACCELERATOR_SYSTEMS // DIM**2)) if forced else (8, 2)
            )
        results[forced] = model.user_factors.data.clone(), model.item_factors.data.clone(), losses
        counts = [len(side) for side in chunks]
        assert counts == [1, 1] if forced else min(counts) > 2
    for host, accelerator in zip(results[False], results[True], strict=True):
        torch.testing.assert_close(accelerator, host, rtol=1e-12, atol=1e-12)


def test_chunks_cover_every_row_once_within_budget():
    lengths = torch.tensor([0, 5, 1, 9, 3, 3, 0, 40, 2])
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    chunks = padded_chunks(indptr, max_slots=12, max_rows=3)
    rows = torch.cat([c.rows for c in chunks])
    assert sorted(rows.tolist()) == list(range(lengths.numel()))
    for chunk in chunks:
        assert chunk.rows.numel() <= 3
        assert chunk.positions.numel() <= 12 or chunk.rows.numel() == 1
        assert (chunk.mask.sum(1) == lengths[chunk.rows]).all()
        assert (chunk.positions[chunk.mask] - indptr[chunk.rows].repeat_interleave(lengths[chunk.rows]) >= 0).all()
    assert chunk_bounds(torch.tensor([1, 1, 1, 1]).numpy(), max_slots=2, max_rows=10) == [(0, 2), (2, 4)]


def test_empty_rows_are_zero_for_wrmf():
    R = random_matrix(6)
    model = make_model("wrmf", solver="cg")
    problem = model.weighted_squares(to_csr(R))
    model.solve_items(problem)
    assert (model.item_factors.data[-1] == 0).all()


@pytest.mark.parametrize("solver, tolerance", [("cholesky", 1e-10), ("cg", 1e-6)])
def test_agrees_with_implicit_als(solver, tolerance):
    """WRMF against implicit 0.7.3 (the `test` extra; CI runs it): same float64 init, confidence α r (`confidence:
    scaled`), λ and CG steps; the user and item factors agree after each of 3 iterations. Exact solves agree to
    1e-10 (measured ~5e-12 relative). CG to 1e-6: the two summation orders differ by ~3e-8 relative after one
    iteration and ~1e-6 after three, even in float64 (CG on ill-conditioned rows amplifies rounding; in float32 the
    drift is ~1e-4 per iteration)."""
    import implicit.cpu.als as implicit_als
    import numpy as np
    import scipy.sparse as sp
    import threadpoolctl

    generator = torch.Generator().manual_seed(7)
    R = torch.rand(60, 45, generator=generator) < 0.15
    factors, alpha, lam = 8, 5.0, 0.1
    model_class = MODELS.get("wrmf")
    torch.manual_seed(0)
    model = model_class(
        60,
        45,
        factors,
        model_class.Args(
            alpha=alpha, regularization=lam, confidence="scaled", solver=solver, cg_steps=3, dtype="float64"
        ),
    )
    reference = implicit_als.AlternatingLeastSquares(
        factors=factors,
        regularization=lam,
        alpha=alpha,
        iterations=1,
        use_cg=solver == "cg",
        num_threads=1,
        calculate_training_loss=False,
        dtype=np.float64,
    )
    reference.user_factors = model.user_factors.data.numpy().copy()
    reference.item_factors = model.item_factors.data.numpy().copy()
    problem = model.weighted_squares(to_csr(R))
    for _ in range(3):
        with threadpoolctl.threadpool_limits(1, "blas"):  # implicit warns unless BLAS is single-threaded
            reference.fit(sp.csr_matrix(R.numpy().astype(np.float32)), show_progress=False)  # one more iteration
        model.solve_users(problem)
        model.solve_items(problem)
        for ours, theirs in (
            (model.user_factors.data, reference.user_factors),
            (model.item_factors.data, reference.item_factors),
        ):
            torch.testing.assert_close(ours, torch.from_numpy(theirs), rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("model", ["wrmf", "rg2", "rgx"])
def test_trains_through_the_trainer_reproducibly(tiny, tmp_path, model):
    raw = {"dataset": "tiny", "model": model, "dim": 8, "epochs": 3, "patience": 10, "device": "cpu"}
    records = []
    for attempt in range(2):
        outcome = train_run(resolve(raw), tiny, tmp_path / f"{model}{attempt}", progress=make_progress(quiet=True))
        lines = (outcome.folder / "epochs.jsonl").read_text().splitlines()
        records.append([json.loads(line) for line in lines])
    assert len(records[0]) == 3
    assert [r["loss"] for r in records[0]] == [r["loss"] for r in records[1]]
    assert [r["valid_ndcg@20"] for r in records[0]] == [r["valid_ndcg@20"] for r in records[1]]
    if model == "wrmf":  # RG's default form official: its item half-step can raise the loss (recx.models.als.rg)
        assert records[0][-1]["loss"] <= records[0][0]["loss"]


@pytest.mark.parametrize(
    "args, key",
    [
        ({"solver": "lu"}, "solver"),
        ({"beta": 2.0}, "beta"),
        ({"weights": "eq17"}, "weights"),
        ({"form": "paper"}, "form"),
        ({"weights": "eq16"}, "form"),
    ],
)
def test_bad_model_args_name_the_key(args, key):
    with pytest.raises(RecxError, match=f"model_args.*{key}"):
        resolve({"model": "rgx", "model_args": args})


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["wrmf", "rgx-hyper"])
@pytest.mark.parametrize("solver", ["cg", "cholesky"])
def test_cuda_half_steps_equal_cpu(case, solver):
    R = random_matrix(8)
    results = []
    for device in ("cpu", "cuda"):
        model = make_model(case, solver=solver).to(device)
        problem = model.weighted_squares(to_csr(R.to(device)))
        for _ in range(2):
            model.solve_users(problem)
            model.solve_items(problem)
        results.append(model.item_factors.data.cpu())
    torch.testing.assert_close(results[1], results[0], rtol=1e-9, atol=1e-9)


def test_half_steps_validate_after_every_half_step_and_end_where_whole_epochs_do(tiny, tmp_path):
    """half_steps (the RG authors' RecStudio loop): 4 half-step epochs are 2 whole epochs' solves (user, item, user,
    item), each validated; the factors end equal to the bit."""
    from recx.runs.train_run import train_run

    common = {"dataset": "tiny", "model": "rg2", "dim": 8, "patience": 10, "device": "cpu"}
    common["model_args"] = {"solver": "cholesky"}
    train_run(resolve({**common, "epochs": 2}), tiny, tmp_path / "whole")
    halves = resolve({**common, "epochs": 4, "half_steps": True})
    assert halves.run_id() != resolve({**common, "epochs": 4}).run_id()
    train_run(halves, tiny, tmp_path / "halves")
    records = [json.loads(line) for line in (tmp_path / "halves" / "epochs.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all("valid_ndcg@20" in record for record in records)
    whole, halved = torch.load(tmp_path / "whole" / "model.pt"), torch.load(tmp_path / "halves" / "model.pt")
    assert all(torch.equal(whole[name], halved[name]) for name in whole)


def test_half_steps_are_refused_for_a_model_trained_by_gradient_steps():
    with pytest.raises(RecxError, match="half_steps = true: model 'mf' is not fitted by alternating half-steps"):
        resolve({"model": "mf", "half_steps": True})


def test_a_normal_start_as_the_rg_authors_and_earlier_runs_keep_their_ids():
    """`model_args.init: normal` starts the factors from N(0, init_std²) (RecStudio's normal_initialization, the RG
    authors' `init_method: normal`); it is an `added` argument, so a configuration that leaves it at `uniform` records
    neither it nor init_std and keeps the run id it had before (9ba93b13b3bf for rg2's defaults)."""
    from recx.config.run_config import resolve
    from recx.models.registry import MODELS

    default = resolve({"model": "rg2"})
    assert default.run_id() == "9ba93b13b3bf" == resolve({"model": "rg2", "model_args": {"init": "uniform"}}).run_id()
    assert "init" not in default.model_args and "init_std" not in default.model_args
    normal = resolve({"model": "rg2", "model_args": {"init": "normal", "init_std": 0.5}})
    assert normal.model_args["init"] == "normal" and normal.run_id() != default.run_id()
    model_class = MODELS.get("rg2")
    torch.manual_seed(0)
    model = model_class(4000, 3000, 16, model_class.Args(**normal.model_args))
    factors = torch.cat([model.user_factors.flatten(), model.item_factors.flatten()])
    assert abs(float(factors.mean())) < 0.01 and float(factors.std()) == pytest.approx(0.5, rel=0.01)
    assert float(factors.min()) < 0  # not the uniform start in [0, init_scale)
