"""Mult-VAE / FastVAE: the training objective against a dense float64 reference, the sampled softmax's gradient
against the full softmax's, and end-to-end runs through the training loop's user-batch runner."""

from __future__ import annotations

import math

import pytest
import torch
from sampler_helpers import make_sampler, random_dataset

from recx.config.run_config import resolve
from recx.core.errors import RecxError
from recx.losses.user_softmax import full_softmax_nll, sampled_softmax_nll
from recx.models.multvae import MultVAE, MultVAEArgs
from recx.runs.train_run import train_run
from recx.samplers.base import Batch
from recx.training.build import build_model
from recx.training.runners.users import UserEpochs


def dense_reference(model: MultVAE, dataset, users, keep, noise, beta) -> torch.Tensor:
    """Σ_u [-Σ_{i ∈ y_u} log softmax_i + β KL_u] with dense float64 matrices (no index tricks); `keep` is the
    dropout mask of the input entries (dropout_at input) or of the hidden layer (dropout_at hidden)."""
    y = dataset.train.dense_rows(users).double()
    x = y / y.sum(1, keepdim=True).sqrt()
    bias = model.encoder_bias if model.encoder_bias is not None else 0
    if model.args.dropout_at == "input":
        dropped = torch.zeros_like(y)
        dropped[y.bool()] = keep.double() / (1 - model.args.dropout)
        hidden = torch.relu((x * dropped) @ model.encoder_in + bias)
    else:
        hidden = torch.relu((x @ model.encoder_in) * keep.double() / (1 - model.args.dropout) + bias)
    out = hidden @ model.encoder_out.weight.T + model.encoder_out.bias
    mu, log_var = out[:, : model.latent], out[:, model.latent :]
    z = mu + noise * torch.exp(0.5 * log_var)
    query = z @ model.decoder.weight.T + model.decoder.bias
    logits = query @ model.items.T + (model.item_bias if model.item_bias is not None else 0)
    log_softmax = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    nll = -(y * log_softmax).sum()
    kl = 0.5 * (torch.exp(log_var) + mu**2 - 1 - log_var).sum()
    return nll + beta * kl


def test_multvae_objective_equals_a_float64_reference(tiny):
    config = resolve(
        {
            "model": "multvae",
            "loss": "full_softmax",
            "dim": 3,
            "seed": 0,
            "batch_size": 16,
            "model_args": {"hidden": 5, "anneal_cap": 1.0, "anneal_steps": 4},
        }
    )
    model = MultVAE(tiny.n_users, tiny.n_items, 3, MultVAEArgs(hidden=5, anneal_cap=1.0, anneal_steps=4), tiny).double()
    runner = UserEpochs(config, tiny, model, torch.Generator().manual_seed(7))
    runner.updates = 1
    users = torch.tensor([0, 5, 9, 11])
    objective = runner.batch_objective(users)
    replay = torch.Generator().manual_seed(7)
    nnz = int(tiny.train.row_lengths()[users].sum())
    keep = torch.rand(nnz, generator=replay) >= 0.5
    noise = torch.randn((4, 3), generator=replay, dtype=torch.float64)
    reference = dense_reference(model, tiny, users, keep, noise, beta=0.25)
    assert objective.dtype == torch.float64
    assert torch.allclose(objective, reference, rtol=1e-12, atol=1e-10)


def test_the_official_codes_options_equal_the_float64_reference(tiny):
    """dropout on the hidden layer, no encoder bias and a trained item bias (HERECJ/FastVae_Gpu's encoder and output
    layer)."""
    options = {
        "hidden": 5,
        "anneal_cap": 1.0,
        "anneal_steps": 4,
        "dropout_at": "hidden",
        "item_bias": True,
        "encoder_bias": False,
    }
    args = MultVAEArgs(**options)
    config = resolve({"model": "multvae", "loss": "full_softmax", "dim": 3, "batch_size": 16, "model_args": options})
    model = MultVAE(tiny.n_users, tiny.n_items, 3, args, tiny).double()
    with torch.no_grad():
        model.item_bias.copy_(torch.randn(tiny.n_items, dtype=torch.float64))
    runner = UserEpochs(config, tiny, model, torch.Generator().manual_seed(3))
    runner.updates = 2
    users = torch.tensor([1, 4, 8, 12])
    objective = runner.batch_objective(users)
    replay = torch.Generator().manual_seed(3)
    keep = torch.rand((4, 5), generator=replay, dtype=torch.float64) >= 0.5
    noise = torch.randn((4, 3), generator=replay, dtype=torch.float64)
    reference = dense_reference(model, tiny, users, keep, noise, beta=0.5)
    assert torch.allclose(objective, reference, rtol=1e-12, atol=1e-10)
    query, items = model.representations(users)
    assert items is model.items  # evaluation ranks by query · q_i: the official code leaves the bias out
    assert torch.equal(query, model.decode(model.posterior(users)[0]))  # and encodes without dropout
    assert not torch.equal(model.posterior(users, torch.Generator().manual_seed(0))[0], model.posterior(users)[0])
    assert model.encoder_bias is None and len(list(model.parameters())) == 7


def test_the_item_bias_is_divided_by_the_temperature_with_the_scores(tiny):
    options = {"hidden": 5, "item_bias": True, "dropout": 0.0}
    model = MultVAE(tiny.n_users, tiny.n_items, 3, MultVAEArgs(**options), tiny).double()
    with torch.no_grad():
        model.item_bias.copy_(torch.randn(tiny.n_items, dtype=torch.float64))
    objectives = []
    for temperature in (1.0, 0.25):
        config = resolve(
            {
                "model": "multvae",
                "loss": "full_softmax",
                "dim": 3,
                "model_args": options,
                "loss_args": {"temperature": temperature},
            }
        )
        runner = UserEpochs(config, tiny, model, torch.Generator().manual_seed(5))
        objectives.append(runner.batch_objective(torch.tensor([2, 6])))
    replay = torch.Generator().manual_seed(5)
    noise = torch.randn((2, 3), generator=replay, dtype=torch.float64)
    mu, log_var = model.posterior(torch.tensor([2, 6]))
    logits = (model.decode(mu + noise * torch.exp(0.5 * log_var)) @ model.items.T + model.item_bias) / 0.25
    y = tiny.train.dense_rows(torch.tensor([2, 6])).double()
    reference = -(y * torch.log_softmax(logits, dim=1)).sum()
    assert torch.allclose(objectives[1], reference, rtol=1e-12) and not torch.allclose(objectives[0], objectives[1])


def test_normal_init_draws_the_tables_from_a_standard_normal(tiny):
    normal = MultVAE(tiny.n_users, tiny.n_items, 3, MultVAEArgs(hidden=400, input_init="normal"), tiny)
    items_normal = MultVAE(tiny.n_users, tiny.n_items, 3, MultVAEArgs(hidden=400, item_init="normal"), tiny)
    uniform = MultVAE(tiny.n_users, tiny.n_items, 3, MultVAEArgs(hidden=400), tiny)
    assert 0.95 < normal.encoder_in.std() < 1.05 and normal.items.abs().max() <= 1 / 20
    assert 0.95 < items_normal.items.std() < 1.05 and items_normal.encoder_in.abs().max() <= 1 / 20
    assert uniform.encoder_in.abs().max() <= 1 / 20 and uniform.items.abs().max() <= 1 / 20


@pytest.mark.parametrize(
    "model_args, message",
    [
        ({"item_bias": True}, "multvae only"),
        ({"dropout_at": "output"}, "expected one of input, hidden"),
        ({"input_init": "zeros"}, "expected one of uniform, normal"),
        ({"item_init": "xavier"}, "item_init"),
    ],
)
def test_invalid_official_options_are_refused(tiny, model_args, message):
    with pytest.raises(RecxError, match=message):
        config = resolve({"dataset": "tiny", "model": "fastvae", "loss": "softmax", "model_args": model_args})
        build_model(config, tiny, torch.device("cpu"))


def test_evaluation_uses_the_posterior_mean(tiny):
    model = MultVAE(tiny.n_users, tiny.n_items, 4, MultVAEArgs(hidden=6), tiny)
    users = torch.arange(10)
    query, items = model.representations(users)
    assert torch.equal(query, model.decode(model.posterior(users)[0]))
    assert torch.equal(model.query(users), model.query(users)) and items.shape == (tiny.n_items, 6)


def test_sampled_softmax_with_the_softmax_proposal_has_the_full_gradient_in_expectation():
    """With q = softmax every corrected logit is log Z, so E[∇ sampled] = T/(T+1) ∇ full over {i} ∪ Φ (T draws):
    the same direction and, but for that factor, the same gradient (Bengio & Senécal; the FastVAE paper's §3.2)."""
    torch.manual_seed(0)
    dataset = random_dataset(4, 10, seed=0)
    n_draws, replicas = 4, 40_000
    query = torch.randn(1, 3, dtype=torch.float64)
    items = torch.randn(10, 3, dtype=torch.float64)
    positives = torch.tensor([2, 7])

    def gradients(proposal: str):
        q, table = query.clone().requires_grad_(), items.clone().requires_grad_()
        sampler = (
            make_sampler(proposal, dataset, n_draws, n_codewords=2)
            if proposal == "midx"
            else make_sampler(proposal, dataset, n_draws)
        )
        queries = q.expand(replicas, -1)
        rows = torch.arange(replicas).repeat_interleave(2)
        positive_items = positives.repeat(replicas)
        batch = Batch(torch.zeros(replicas, dtype=torch.long), positive_items[::2], queries.detach(), table.detach())
        negatives = sampler.sample(batch)
        positive_log_q = sampler.log_probability(
            Batch(batch.users[rows], positive_items, queries.detach()[rows], table.detach()), positive_items[:, None]
        )[:, 0]
        (sampled_softmax_nll(queries, table, rows, positive_items, positive_log_q, negatives) / replicas).backward()
        return q.grad, table.grad

    q_full, table_full = query.clone().requires_grad_(), items.clone().requires_grad_()
    full_softmax_nll(q_full, table_full, torch.zeros(2, dtype=torch.long), positives).backward()
    factor = n_draws / (n_draws + 1)
    q_grad, table_grad = gradients("midx")
    assert torch.allclose(q_grad, factor * q_full.grad, atol=0.03)
    assert torch.allclose(table_grad, factor * table_full.grad, atol=0.03)
    q_uniform, table_uniform = gradients("uniform")
    assert not torch.allclose(table_uniform, factor * table_full.grad, atol=0.03)


RUNS = [
    ("multvae", "full_softmax", "full", {}),
    ("fastvae", "softmax", "midx_pop", {"n_codewords": 4}),
    ("fastvae", "softmax", "midx_uni", {"n_codewords": 4}),
    ("fastvae", "softmax", "uniform", {}),
    ("fastvae", "softmax", "popularity", {}),
    ("fastvae", "softmax", "kernel", {"leaf_size": 16}),
]


@pytest.mark.parametrize("model, loss, sampler, sampler_args", RUNS, ids=[f"{m}-{s}" for m, _, s, _ in RUNS])
def test_vae_trains_through_the_user_runner(tiny, tmp_path, model, loss, sampler, sampler_args):
    config = resolve(
        {
            "dataset": "tiny",
            "model": model,
            "loss": loss,
            "sampler": sampler,
            "dim": 8,
            "epochs": 2,
            "batch_size": 32,
            "n_negatives": 20,
            "lr": 0.01,
            "weight_decay": 0.01,
            "device": "cpu",
            "kernels": "torch",
            "sampler_args": sampler_args,
            "model_args": {"hidden": 16},
        }
    )
    outcome = train_run(config, tiny, tmp_path / "run", ks=[10])
    assert all(math.isfinite(v) for v in outcome.results.value)
    again = train_run(config, tiny, tmp_path / "again", ks=[10])
    assert outcome.results.value.tolist() == again.results.value.tolist()


def test_vae_refuses_a_loss_it_does_not_train_with():
    """Refused when the configuration is resolved (a sweep's plan and --dry-run), not when the run starts."""
    with pytest.raises(RecxError, match="model 'multvae' trains with loss 'full_softmax'"):
        resolve({"dataset": "tiny", "model": "multvae", "loss": "bpr", "device": "cpu"})


def test_sampled_softmax_scores_negatives_the_same_way_on_both_paths(monkeypatch):
    from recx.losses import user_softmax
    from recx.samplers.base import Negatives

    generator = torch.Generator().manual_seed(0)
    query, items = torch.randn(3, 4, generator=generator, dtype=torch.float64), torch.randn(9, 4, dtype=torch.float64)
    negatives = Negatives(
        torch.randint(0, 9, (3, 5), generator=generator), torch.randn(3, 5, dtype=torch.float64), torch.zeros(3)
    )
    rows, positives, positive_log_q = torch.tensor([0, 0, 1, 2]), torch.tensor([1, 2, 3, 4]), torch.randn(4).double()
    dense = sampled_softmax_nll(query, items, rows, positives, positive_log_q, negatives)
    monkeypatch.setattr(user_softmax, "DENSE_SCORES_RATIO", 0)
    gathered = sampled_softmax_nll(query, items, rows, positives, positive_log_q, negatives)
    corrected = query @ items.T
    reference = sum(
        torch.logsumexp(
            torch.cat([(corrected[r, p] - lq).view(1), corrected[r, negatives.items[r]] - negatives.log_q[r]]), 0
        )
        - (corrected[r, p] - lq)
        for r, p, lq in zip(rows, positives, positive_log_q, strict=True)
    )
    assert torch.allclose(dense, reference) and torch.allclose(gathered, reference)


def test_the_epochs_history_sizes_are_each_steps_training_items():
    dataset = random_dataset(n_users=23, n_items=30)
    config = resolve({"model": "multvae", "loss": "full_softmax", "dim": 4, "batch_size": 5, "device": "cpu"})
    model = MultVAE(dataset.n_users, dataset.n_items, 4, MultVAEArgs(), dataset)
    runner = UserEpochs(config, dataset, model, torch.Generator().manual_seed(0))
    order = runner.users[torch.randperm(runner.users.numel())]
    sizes = runner.history_sizes(order)
    lengths = dataset.train.row_lengths()
    assert sizes == [int(lengths[order[s * 5 : (s + 1) * 5]].sum()) for s in range(runner.n_steps)]
    history = model.history(order[:5], sizes[0])
    assert torch.equal(history.rows, model.history(order[:5]).rows) and history.items.numel() == sizes[0]
    assert torch.equal(history.lengths, lengths[order[:5]])
    assert torch.equal(history.rows[history.firsts], torch.arange(5))  # each user's first pair
    assert torch.equal(history.items[history.firsts], dataset.train.indices[dataset.train.indptr[order[:5]]])


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name, loss, sampler", [("multvae", "full_softmax", "full"), ("fastvae", "softmax", "uniform")]
)
def test_a_cuda_vae_step_issues_no_host_sync(name, loss, sampler):
    device = torch.device("cuda")
    dataset = random_dataset(n_users=40, n_items=30).to(device)
    config = resolve(
        {"model": name, "loss": loss, "sampler": sampler, "n_negatives": 6, "dim": 4, "batch_size": 8, "device": "cuda"}
    )
    model = build_model(config, dataset, device)
    runner = UserEpochs(config, dataset, model, torch.Generator(device=device).manual_seed(0))
    users = runner.users[:8]
    nnz = runner.history_sizes(runner.users)[0]
    for debug in ("default", "error"):  # a warm-up step, then one that fails on any host sync
        torch.cuda.set_sync_debug_mode(debug)
        try:
            objective = runner.batch_objective(users, nnz)
            runner.clear_gradients()  # as the runner's step: FastVAE's row-sparse gradients go into kept dense buffers
            objective.backward()
            runner.optimizer.step()
        finally:
            torch.cuda.set_sync_debug_mode("default")


def _trained_fastvae(steps: int = 3, fresh_gradients: bool = False) -> UserEpochs:
    """FastVAE after `steps` steps of the user runner; `fresh_gradients`: torch's usual loop instead (gradients set
    to None before each backward, which allocates them anew)."""
    dataset = random_dataset(n_users=40, n_items=600)
    config = resolve(
        {
            "model": "fastvae",
            "loss": "softmax",
            "sampler": "uniform",
            "n_negatives": 5,
            "dim": 4,
            "batch_size": 8,
            "lr": 0.01,
            "weight_decay": 0.01,
            "device": "cpu",
            "model_args": {"hidden": 6},
        }
    )
    torch.manual_seed(0)
    model = build_model(config, dataset, torch.device("cpu"))
    runner = UserEpochs(config, dataset, model, torch.Generator().manual_seed(0))
    if fresh_gradients:
        optimizer, step = runner.optimizer, runner.optimizer.step

        def step_then_drop_gradients():
            step()
            torch.optim.Adam.zero_grad(optimizer, set_to_none=True)

        torch.optim.Adam.zero_grad(optimizer, set_to_none=True)
        optimizer.step = step_then_drop_gradients
    runner.users_all = runner.users
    runner.users, runner.n_steps = runner.users[:8], 1
    runner.train_epoch(1, torch.zeros(1), lambda step: None)
    runner.first_buffers = [
        table.grad.data_ptr() for table in (model.items, model.encoder_in) if table.grad is not None
    ]
    runner.users, runner.n_steps = runner.users_all[: steps * 8], steps
    runner.train_epoch(2, torch.zeros(steps), lambda step: None)
    return runner


def test_a_users_step_sums_row_sparse_gradients_into_buffers_it_keeps(monkeypatch):
    """The gathered rows' sparse gradients, summed into the kept dense buffers, train the model as fresh dense
    gradients do; the buffers are the ones allocated at the start (no table-sized gradient per step)."""
    from recx.core import gather
    from recx.losses import user_softmax
    from recx.models import multvae as model_module

    monkeypatch.setattr(user_softmax, "DENSE_SCORES_RATIO", 0)  # every negative gathered, not scored by a product
    sparse = _trained_fastvae()
    assert all(not param.grad.is_sparse for param in sparse.model.parameters())
    assert sparse.first_buffers == [sparse.model.items.grad.data_ptr(), sparse.model.encoder_in.grad.data_ptr()]

    def dense_gather(table, ids, sparse=False):
        return gather.gather_rows(table, ids)

    monkeypatch.setattr(user_softmax, "gather_rows", dense_gather)
    monkeypatch.setattr(model_module, "gather_rows", dense_gather)
    dense = _trained_fastvae(fresh_gradients=True)
    for (name, a), (_, b) in zip(sparse.model.named_parameters(), dense.model.named_parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7, msg=name)
