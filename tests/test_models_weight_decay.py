"""Weight-decay modes through one real step (training_loss + the training loop's Adam): batched decay leaves rows outside
the batch untouched and gives the rows inside exactly the full-table update; full-table decay shrinks every row;
none leaves the rows outside alone."""

import pytest
import torch

from recx.config.run_config import resolve
from recx.core.errors import RecxError
from recx.training.build import build_loss, build_model, build_sampler
from recx.training.runners.interactions import run_optimizer
from recx.training.step import training_loss


class Recording:
    """Delegates to a sampler and keeps the negatives it drew."""

    def __init__(self, sampler):
        self.sampler, self.drawn = sampler, None

    def sample(self, batch):
        self.drawn = self.sampler.sample(batch)
        return self.drawn


def _one_step(tiny, model_name: str, mode: str, decay: float, loss: str = "bpr"):
    config = resolve(
        {
            "model": model_name,
            "dim": 8,
            "loss": loss,
            "sampler": "uniform",
            "n_negatives": 3,
            "weight_decay": decay,
            "weight_decay_mode": mode,
            "lr": 0.01,
            "device": "cpu",
        }
    )
    device = torch.device("cpu")
    model = build_model(config, tiny, device)
    before = [t.detach().clone() for t in model.embedding_tables()]
    sampler = Recording(build_sampler(config, tiny, torch.Generator().manual_seed(0)))
    loss_fn = build_loss(config, tiny, device)
    optimizer = run_optimizer(model, loss_fn, config)
    index = torch.arange(0, 40, 5)
    users, positives = tiny.train.row_ids()[index], tiny.train.indices[index]
    loss = training_loss(model, sampler, loss_fn, config, users, positives)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    used_items = torch.cat([positives, sampler.drawn.items.flatten()]) if loss_fn.uses_negatives else positives
    outside_users = torch.ones(tiny.n_users, dtype=torch.bool)
    outside_users[users] = False
    outside_items = torch.ones(tiny.n_items, dtype=torch.bool)
    outside_items[used_items] = False
    after = [t.detach() for t in model.embedding_tables()]
    return before, after, (outside_users, outside_items)


@pytest.mark.parametrize("model_name", ["mf", "nonlinear_mf"])
def test_batched_decay_leaves_rows_outside_the_batch_untouched(tiny, model_name):
    before, after, outside = _one_step(tiny, model_name, "batch", 0.5)
    for b, a, mask in zip(before, after, outside, strict=True):
        assert mask.any() and (~mask).any()
        assert torch.equal(a[mask], b[mask])
        assert not torch.equal(a[~mask], b[~mask])
    _, plain, _ = _one_step(tiny, model_name, "none", 0.0)
    _, full, _ = _one_step(tiny, model_name, "full", 0.5)
    for a, p, f, mask in zip(after, plain, full, outside, strict=True):
        assert not torch.allclose(a[~mask], p[~mask])  # the decay acted on the batch's rows ...
        assert torch.allclose(a[~mask], f[~mask], rtol=0, atol=1e-7)  # ... exactly as full-table decay does


def test_batched_decay_skips_candidates_a_loss_does_not_use(tiny):
    before, after, outside = _one_step(tiny, "mf", "batch", 0.5, loss="directau")
    for b, a, mask in zip(before, after, outside, strict=True):
        assert torch.equal(a[mask], b[mask]) and not torch.equal(a[~mask], b[~mask])


@pytest.mark.parametrize("model_name", ["mf", "nonlinear_mf"])
def test_full_table_decay_shrinks_rows_outside_the_batch(tiny, model_name):
    before, after, outside = _one_step(tiny, model_name, "full", 0.5)
    for b, a, mask in zip(before, after, outside, strict=True):
        assert (a[mask].norm(dim=1) < b[mask].norm(dim=1)).all()


def test_no_decay_leaves_rows_outside_the_batch_untouched(tiny):
    before, after, outside = _one_step(tiny, "mf", "none", 0.5)
    for b, a, mask in zip(before, after, outside, strict=True):
        assert torch.equal(a[mask], b[mask])


@pytest.mark.parametrize("decay_loss", [False, True])
def test_margin_decay_decays_mawus_margins_as_prisms_adam(tiny, decay_loss):
    """MAWU's margins: without margin_decay they are never decayed (their group's weight_decay 0); with it they
    share the embeddings' decay, as PRISM's Adam over the whole module: one step equals torch's Adam with L2."""
    settings = {"loss": "mawu", "n_negatives": 1, "optimizer": "adam", "weight_decay": 0.5, "dim": 8, "lr": 0.01}
    config = resolve({**settings, "device": "cpu", "loss_args": {"margin_decay": decay_loss}})
    model = build_model(config, tiny, torch.device("cpu"))
    loss_fn = build_loss(config, tiny, torch.device("cpu"))
    with torch.no_grad():
        loss_fn.user_margin.fill_(0.3)
    optimizer = run_optimizer(model, loss_fn, config)
    loss_fn.user_margin.grad = torch.zeros_like(loss_fn.user_margin)
    for param in model.parameters():
        param.grad = torch.zeros_like(param)
    optimizer.step()
    reference = torch.full_like(loss_fn.user_margin, 0.3, requires_grad=True)
    reference.grad = torch.zeros_like(reference)
    torch.optim.Adam([reference], lr=0.01, weight_decay=0.5 if decay_loss else 0.0).step()
    assert torch.equal(loss_fn.user_margin.detach(), reference.detach())
    assert decay_loss == (float(loss_fn.user_margin[0]) < 0.3)


def test_margin_decay_needs_full_decay():
    with pytest.raises(
        Exception, match="loss 'mawu' decays its own parameters with the model's only in weight_decay_mode"
    ):
        resolve({"loss": "mawu", "loss_args": {"margin_decay": True}, "weight_decay_mode": "batch"})


def test_the_retired_run_key_weight_decay_loss_is_an_unknown_key():
    """MAWU's margin decay has one spelling, loss_args.margin_decay."""
    with pytest.raises(RecxError, match="unknown key 'weight_decay_loss'"):
        resolve({"loss": "mawu", "weight_decay_loss": True, "weight_decay": 1e-6})
