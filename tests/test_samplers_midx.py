"""MIDX samplers (the FastVAE paper's Theorems 4.1, 5.1-5.3) and the quadratic-kernel sampler: their draws follow
their laws, written here independently in float64 from the codebooks / item vectors, and log_q is that law's log."""

from __future__ import annotations

import math

import pytest
import torch
from sampler_helpers import assert_follows, make_sampler, random_batch, random_dataset

from recx.config.run_config import resolve
from recx.core.errors import RecxError
from recx.kernels.midx_draw import draw_torch
from recx.runs.train_run import train_run

N_ITEMS = 60
N_DRAWS = 20_000


@pytest.fixture(scope="module")
def problem():
    dataset = random_dataset(20, N_ITEMS, seed=0)
    batch = random_batch(dataset, batch_size=3, dim=6, seed=1)
    batch = type(batch)(batch.users, batch.positives, batch.query.double(), batch.item_table.double())
    return dataset, batch


def all_items(batch) -> torch.Tensor:
    return torch.arange(N_ITEMS)[None, :].expand(batch.query.shape[0], -1)


def static_reference(sampler, batch, log_weights: torch.Tensor) -> torch.Tensor:
    """Eq. 4 / 5: log q(i) = log softmax_i(z · (c¹_{k1(i)} ⊕ c²_{k2(i)}) + log w_i), in float64."""
    quantised = sampler.codebooks.quantised().double()
    return torch.log_softmax(batch.query @ quantised.T + log_weights, dim=1)


def check_draws_and_log_q(sampler, batch, reference: torch.Tensor) -> None:
    negatives = sampler.sample(batch)
    assert torch.allclose(sampler.log_probability(batch, all_items(batch)), reference, atol=1e-10)
    assert torch.allclose(negatives.log_q, reference.gather(1, negatives.items), atol=1e-10)
    assert torch.allclose(negatives.positive_log_q, reference.gather(1, batch.positives[:, None])[:, 0], atol=1e-10)
    for row in range(batch.query.shape[0]):
        assert_follows(negatives.items[row], reference[row].exp().numpy())


def test_midx_exact_draws_follow_the_softmax(problem):
    dataset, batch = problem
    sampler = make_sampler("midx", dataset, N_DRAWS, n_codewords=4)
    check_draws_and_log_q(sampler, batch, torch.log_softmax(batch.query @ batch.item_table.T, dim=1))


def test_midx_exact_stays_exact_after_the_items_move(problem):
    """Theorem 4.1 holds for any codewords: residuals are taken against the current item vectors."""
    dataset, batch = problem
    sampler = make_sampler("midx", dataset, N_DRAWS, n_codewords=4)
    sampler.rebuild(None, batch.item_table)
    moved = type(batch)(
        batch.users, batch.positives, batch.query, batch.item_table + 0.5 * torch.randn_like(batch.item_table)
    )
    check_draws_and_log_q(sampler, moved, torch.log_softmax(moved.query @ moved.item_table.T, dim=1))


def test_midx_uni_draws_follow_eq4(problem):
    dataset, batch = problem
    sampler = make_sampler("midx_uni", dataset, N_DRAWS, n_codewords=4)
    sampler.rebuild(None, batch.item_table)
    check_draws_and_log_q(sampler, batch, static_reference(sampler, batch, torch.zeros(N_ITEMS, dtype=torch.float64)))


@pytest.mark.parametrize(
    "variant, transform", [("count", lambda c: c), ("log", torch.log1p), ("pow0.75", lambda c: c**0.75)]
)
def test_midx_pop_draws_follow_eq5(problem, variant, transform):
    dataset, batch = problem
    sampler = make_sampler("midx_pop", dataset, N_DRAWS, n_codewords=4, variant=variant)
    sampler.rebuild(None, batch.item_table)
    pop = transform(dataset.item_popularity.double() + sampler.args.smoothing)
    check_draws_and_log_q(sampler, batch, static_reference(sampler, batch, torch.log(pop)))


def test_midx_draws_differ_from_the_softmax_when_they_should(problem):
    """The static variants are not the softmax (guards against a test that compares the softmax with itself)."""
    dataset, batch = problem
    sampler = make_sampler("midx_uni", dataset, 8, n_codewords=4)
    softmax = torch.log_softmax(batch.query @ batch.item_table.T, dim=1)
    assert (sampler.log_probability(batch, all_items(batch)) - softmax).abs().max() > 0.1


@pytest.mark.parametrize("name", ["midx_uni", "midx_pop"])
def test_theorem_5_3_and_5_4_kl_bounds(name):
    """KL(Q_midx ‖ softmax) <= 2 C ‖z‖ (+ log max pop / min pop for MIDX_Pop), C = max ‖q̃_i‖, on random data."""
    dataset = random_dataset(40, 200, seed=3)
    for seed in range(3):
        batch = random_batch(dataset, batch_size=16, dim=8, seed=seed, scale=2.0)
        batch = type(batch)(batch.users, batch.positives, batch.query.double(), batch.item_table.double())
        sampler = make_sampler(name, dataset, 4, n_codewords=3)
        sampler.rebuild(None, batch.item_table)
        log_q = sampler.log_probability(batch, torch.arange(200)[None, :].expand(16, -1))
        log_p = torch.log_softmax(batch.query @ batch.item_table.T, dim=1)
        kl = (log_q.exp() * (log_q - log_p)).sum(1)
        residual_norm = (batch.item_table - sampler.codebooks.quantised()).norm(dim=1).max()
        bound = 2 * residual_norm * batch.query.norm(dim=1)
        if name == "midx_pop":
            pop = torch.log1p(dataset.item_popularity.double())  # the default pop(i) = log(1 + count)
            assert pop.min() > 0
            bound = bound + torch.log(pop.max() / pop.min())
        assert (kl >= -1e-12).all() and (kl <= bound).all()
        assert (kl > 1e-6).any()


def test_kernel_sampler_follows_the_quadratic_kernel(problem):
    dataset, batch = problem
    sampler = make_sampler("kernel", dataset, N_DRAWS, alpha=3.0, leaf_size=4)
    kernel = 3.0 * (batch.query @ batch.item_table.T) ** 2 + 1
    check_draws_and_log_q(sampler, batch, torch.log(kernel / kernel.sum(1, keepdim=True)))


def test_kernel_sampler_per_draw_descent_follows_the_kernel(problem):
    """Few draws per query: node masses are computed per draw and level (the other path of `_draw`)."""
    dataset, batch = problem
    replicas = 5000
    repeated = type(batch)(
        batch.users[:1].repeat(replicas),
        batch.positives[:1].repeat(replicas),
        batch.query[:1].repeat(replicas, 1),
        batch.item_table,
    )
    sampler = make_sampler("kernel", dataset, 4, alpha=3.0, leaf_size=2)
    negatives = sampler.sample(repeated)
    assert 4 * 2 * 5 < 2 * sampler.n_leaves  # the per-draw path was taken
    kernel = 3.0 * (batch.query[0] @ batch.item_table.T) ** 2 + 1
    assert_follows(negatives.items, (kernel / kernel.sum()).numpy())


def test_kernel_sampler_handles_a_partial_last_leaf():
    dataset = random_dataset(10, 23, seed=2)
    batch = random_batch(dataset, batch_size=2, dim=3, seed=4)
    batch = type(batch)(batch.users, batch.positives, batch.query.double(), batch.item_table.double())
    sampler = make_sampler("kernel", dataset, N_DRAWS, alpha=1.0, leaf_size=5)
    negatives = sampler.sample(batch)
    assert int(negatives.items.max()) < 23
    kernel = (batch.query @ batch.item_table.T) ** 2 + 1
    assert_follows(negatives.items[0], (kernel[0] / kernel[0].sum()).numpy())


def test_three_stage_draw_matches_its_stages():
    """The torch draw from the cells' joint weights: stage 1 × stage 2 × stage 3 probabilities."""
    generator = torch.Generator().manual_seed(0)
    k, n_items = 3, 12
    cell_of = torch.tensor([0, 0, 1, 2, 4, 4, 4, 5, 6, 8, 8, 3])
    order = torch.argsort(cell_of, stable=True)
    cell_ptr = torch.zeros(k * k + 1, dtype=torch.int64)
    cell_ptr[1:] = torch.cumsum(torch.bincount(cell_of, minlength=k * k), 0)
    weights = torch.rand(n_items, generator=generator, dtype=torch.float64) + 0.1
    cumulative = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(weights[order], 0)])
    cell_mass = torch.zeros(k * k, dtype=torch.float64).index_add_(0, cell_of, weights)
    codeword_part = torch.randn(k * k, generator=generator, dtype=torch.float64)
    cell_log_weight = (torch.log(cell_mass) + codeword_part).view(1, k, k)  # cell 7 is empty: -inf
    joint = cell_mass * codeword_part.exp()
    expected = (joint / joint.sum())[cell_of] * weights / cell_mass[cell_of]
    uniforms = torch.rand((1, 50_000, 3), generator=generator, dtype=torch.float64)
    largest = int(torch.bincount(cell_of).max())
    assert_follows(draw_torch(cell_log_weight, cumulative, cell_ptr, order, uniforms, largest), expected.numpy())


def _draw_by_definition(log_joint, cumulative, cell_ptr, order, u):
    """The module docstring's three stages, one draw at a time in float64 Python."""
    k = log_joint.shape[0]
    joint = torch.exp(log_joint - log_joint.max()).flatten().tolist()
    cells_cdf = [sum(joint[: c + 1]) for c in range(k * k)]
    row_end = [cells_cdf[r * k + k - 1] for r in range(k)]

    def below(fraction, low, high):
        return min(low + fraction * (high - low), math.nextafter(high, 0.0))

    first = next(r for r in range(k) if row_end[r] > below(u[0], 0.0, row_end[-1]))
    low, high = (row_end[first - 1] if first else 0.0), row_end[first]
    cell = next(c for c in range(first * k, first * k + k) if cells_cdf[c] > below(u[1], low, high))
    start, end = int(cell_ptr[cell]), int(cell_ptr[cell + 1])
    target = below(u[2], cumulative[start], cumulative[end])
    return int(order[next(p for p in range(start, end) if cumulative[p + 1] > target)])


@pytest.mark.parametrize("k", [4, 5])
@pytest.mark.parametrize("stage3", ["shared", "per-query", "equal"])
def test_three_stage_draw_equals_its_definition_draw_by_draw(k, stage3):
    """Exact agreement (same uniforms, same items) with a per-draw reference, empty cells included, for K a power
    of two or not and each form of stage-3 weights (equal weights: the arange cumulative)."""
    generator = torch.Generator().manual_seed(4)
    n_items, batch = 30, 3
    cell_of = torch.randint(0, k * k, (n_items,), generator=generator)
    order = torch.argsort(cell_of, stable=True)
    sizes = torch.bincount(cell_of, minlength=k * k)
    cell_ptr = torch.zeros(k * k + 1, dtype=torch.int64)
    cell_ptr[1:] = torch.cumsum(sizes, 0)
    weights = torch.rand(batch, n_items, generator=generator, dtype=torch.float64)
    if stage3 != "per-query":
        weights = (
            weights[:1].expand(batch, -1) if stage3 == "shared" else torch.ones(batch, n_items, dtype=torch.float64)
        )
    cumulative = torch.cat([torch.zeros(batch, 1, dtype=torch.float64), torch.cumsum(weights[:, order], 1)], 1)
    cell_mass = torch.zeros(batch, k * k, dtype=torch.float64).index_add_(1, cell_of, weights)
    log_joint = cell_mass.log() + torch.randn(batch, k * k, generator=generator, dtype=torch.float64) * 2
    log_joint = log_joint.view(batch, k, k)
    uniforms = torch.rand((batch, 200, 3), generator=generator, dtype=torch.float64)
    uniforms[:, :20] = 1 - 2.0**-53  # targets that round onto a CDF's last value: the clamps decide
    given = {"shared": cumulative[0], "per-query": cumulative, "equal": None}[stage3]
    drawn = draw_torch(log_joint, given, cell_ptr, order, uniforms, int(sizes.max()))
    for b in range(batch):
        expected = [
            _draw_by_definition(log_joint[b], cumulative[b].tolist(), cell_ptr, order, uniforms[b, j].tolist())
            for j in range(200)
        ]
        assert drawn[b].tolist() == expected


@pytest.mark.parametrize("init", ["random", "warm"])
def test_codebooks_rebuild_reproducibly(problem, init):
    dataset, batch = problem
    draws = []
    for _ in range(2):
        sampler = make_sampler("midx_pop", dataset, 16, seed=5, n_codewords=4, kmeans_init=init)
        sampler.rebuild(None, batch.item_table)
        sampler.rebuild(None, batch.item_table * 1.1)  # random: from K fresh random items; warm: the first codewords
        draws.append(sampler.sample(batch).items)
    assert torch.equal(draws[0], draws[1])


def test_midx_pop_default_weight_is_log_of_one_plus_count(problem):
    """The paper's pop(i) = log(1 + c_i) (§7.1.4) exactly, without smoothing (it was c_i + 1)."""
    dataset, _ = problem
    sampler = make_sampler("midx_pop", dataset, 4)
    assert torch.equal(sampler.item_weights(), torch.log1p(dataset.item_popularity.double()))


@pytest.mark.parametrize(
    "args, message",
    [
        ({"kmeans_init": "previous"}, "kmeans_init"),
        ({"kmeans_tolerance": 1.0}, "kmeans_tolerance"),
        ({"kmeans_iterations": 0}, "kmeans_iterations"),
        ({"smoothing": -1.0}, "smoothing"),
        ({"variant": "sqrt"}, "variant"),
    ],
)
def test_midx_args_out_of_range_are_refused(args, message):
    with pytest.raises(RecxError, match=message):
        make_sampler("midx_pop", random_dataset(5, 10), 4, **args)


@pytest.mark.parametrize(
    "sampler, sampler_args",
    [
        ("midx", {"n_codewords": 4}),
        ("midx_uni", {"n_codewords": 4}),
        ("midx_pop", {"variant": "log"}),
        ("kernel", {"leaf_size": 8}),
    ],
)
def test_sampler_trains_mf_with_sampled_softmax(tiny, tmp_path, sampler, sampler_args):
    config = resolve(
        {
            "dataset": "tiny",
            "model": "mf",
            "loss": "softmax",
            "sampler": sampler,
            "sampler_args": sampler_args,
            "dim": 8,
            "epochs": 2,
            "batch_size": 64,
            "n_negatives": 8,
            "lr": 0.01,
            "device": "cpu",
            "kernels": "torch",
        }
    )
    values = train_run(config, tiny, tmp_path / "run", ks=[10]).results.value
    assert values.notna().all() and all(math.isfinite(v) for v in values)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["midx_uni", "midx_pop", "midx"])
def test_cupy_midx_draw_agrees_with_torch(name):
    dataset = random_dataset(20, N_ITEMS, seed=0)
    batch = random_batch(dataset, batch_size=3, dim=6, seed=1)
    cuda = type(batch)(batch.users.cuda(), batch.positives.cuda(), batch.query.cuda(), batch.item_table.cuda())
    dataset = dataset.to(torch.device("cuda"))
    sampler_class = make_sampler(name, dataset, 8, n_codewords=4).__class__
    results = {}
    for kernels in ("torch", "cupy"):
        sampler = sampler_class(
            dataset, N_DRAWS, sampler_class.Args(n_codewords=4), torch.Generator(device="cuda").manual_seed(0), kernels
        )
        results[kernels] = sampler.sample(cuda).items.cpu()
        log_q = sampler.log_probability(cuda, torch.arange(N_ITEMS, device="cuda")[None, :].expand(3, -1)).cpu()
    mismatch = (results["torch"] != results["cupy"]).double().mean()
    assert mismatch < 1e-3  # same uniforms, same items (up to float ties at cell boundaries)
    for row in range(3):
        assert_follows(results["cupy"][row], log_q[row].double().exp().numpy())


def lloyd_step_gain(points: torch.Tensor, centroids: torch.Tensor, labels: torch.Tensor) -> float:
    """The relative fall of the squared error that one more Lloyd step (means, then nearest centroids) brings."""
    before = (points - centroids[labels]).pow(2).sum()
    means = torch.stack(
        [points[labels == k].mean(0) if (labels == k).any() else centroids[k] for k in range(centroids.shape[0])]
    )
    after = torch.cdist(points, means).pow(2).min(1).values.sum()
    return float((before - after) / before)


def test_codebooks_are_clustered_to_convergence():
    """The official code runs k-means until the squared error falls by less than 1e-6 of itself (up to 300
    iterations); a fixed budget of 20 iterations (recx's earlier default) stops short of that on this table."""
    table = torch.randn(2000, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    sampler = make_sampler("midx_uni", random_dataset(5, 2000), 4, n_codewords=16)
    sampler.rebuild(None, table)
    for part, half in enumerate(torch.tensor_split(table, 2, dim=1)):
        codebooks = sampler.codebooks
        assert lloyd_step_gain(half, codebooks.codewords[part], codebooks.assignments[part]) < 1e-5


@pytest.mark.parametrize("init", ["random", "warm"])
def test_codebooks_restart_from_random_items_unless_warm(init):
    """kmeans_init random (the official code: a fresh start every epoch) makes a rebuild's codebooks independent
    of the previous ones; warm starts from them."""
    table = torch.randn(300, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    dataset = random_dataset(5, 300)
    codewords = []
    for first in (table, -table.flip(0)):
        sampler = make_sampler("midx_uni", dataset, 4, seed=2, n_codewords=8, kmeans_init=init, kmeans_iterations=5)
        sampler.rebuild(None, first)
        sampler.rebuild(None, table)
        codewords.append(torch.cat(sampler.codebooks.codewords, dim=1))
    assert torch.equal(codewords[0], codewords[1]) == (init == "random")


def test_midx_pop_never_draws_an_item_unseen_in_training():
    """log(1 + 0) = 0: an item without training interactions has weight 0 (whole cells may have none)."""
    dataset = random_dataset(30, 60, density=0.05, seed=4)
    unseen = dataset.item_popularity == 0
    assert unseen.any()
    batch = random_batch(dataset, batch_size=8, dim=4, seed=2)
    sampler = make_sampler("midx_pop", dataset, 500, n_codewords=4)
    negatives = sampler.sample(batch)
    assert not unseen[negatives.items].any() and torch.isfinite(negatives.log_q).all()
    log_q = sampler.log_probability(batch, all_items(batch))
    assert torch.isneginf(log_q[:, unseen]).all()
    assert torch.allclose(log_q.exp().sum(1), torch.ones(8, dtype=log_q.dtype), atol=1e-5)
