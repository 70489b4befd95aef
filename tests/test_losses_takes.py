"""What a loss takes (`Loss.takes`, recx.losses.base.INPUTS): the registry refuses an input without its method, and
the training step gives each loss the first input it takes that fits the batch, else the scores."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from recx.config.run_config import resolve
from recx.core.errors import RecxError
from recx.losses.base import INPUTS, Loss, LossInput
from recx.losses.registry import LOSSES
from recx.samplers.base import Negatives
from recx.training.build import build_loss, build_model
from recx.training.runners.interactions import run_optimizer
from recx.training.step import input_kind

CPU = torch.device("cpu")


@dataclass
class NoArgs:
    pass


def test_every_builtin_loss_has_the_method_of_each_input_it_takes():
    for name in LOSSES.builtins():
        loss_class = LOSSES.get(name)
        assert "scores" in loss_class.takes, name
        assert all(callable(getattr(loss_class, INPUTS[kind], None)) for kind in loss_class.takes), name


@pytest.mark.parametrize(
    "takes, message",
    [
        (("shared_candidates", "scores"), "does not implement over_shared_candidates"),
        (("logits", "scores"), "takes names logits"),
        ("scores", "expected a tuple of scores, shared_candidates"),
    ],
)
def test_a_loss_that_takes_an_input_without_its_method_is_refused(takes, message):
    class Partial(Loss):
        Args = NoArgs

        def __call__(self, batch: LossInput):
            return batch.pos_scores.mean()

    Partial.takes = takes
    with pytest.raises(RecxError, match=message):
        LOSSES.register("partial-takes")(Partial)
    assert "partial-takes" not in LOSSES


def per_query(n_queries: int, n: int) -> Negatives:
    items = torch.arange(n_queries * n).remainder(100).view(n_queries, n)
    return Negatives(items, torch.zeros(items.shape), torch.zeros(n_queries))


def shared(n: int, segments=None) -> Negatives:
    items = torch.arange(n)[None, :]
    return Negatives(items, torch.zeros(items.shape), torch.zeros(8), segments=segments)


CASES = [
    ("softmax", {}, shared(20), "shared_candidates"),
    ("softmax", {}, shared(20, segments=((10, 0.5), (10, 0.5))), "shared_candidates"),
    ("softmax", {}, shared(100), "scores"),  # as many as the catalogue: one product with the whole table
    ("softmax", {}, per_query(8, 20), "scores"),
    ("full_softmax", {"sampler": "full"}, shared(20), "scores"),
    ("bpr", {"optimizer": "rowwise_adagrad"}, per_query(8, 1), "row_gradients"),
    ("bpr", {"optimizer": "adam"}, per_query(8, 1), "scores"),
    ("bpr", {"optimizer": "rowwise_adagrad"}, shared(20), "scores"),
    ("bce", {"optimizer": "rowwise_adagrad"}, per_query(8, 1), "scores"),
    ("directau", {}, shared(20), "scores"),
]


@pytest.mark.parametrize("loss, settings, negatives, kind", CASES)
def test_the_step_gives_each_loss_the_input_that_fits(tiny, loss, settings, negatives, kind):
    config = resolve({"model": "mf", "dim": 8, "loss": loss, "device": "cpu", **settings})
    model = build_model(config, tiny, CPU)
    loss_fn = build_loss(config, tiny, CPU)
    optimizer = run_optimizer(model, loss_fn, config)
    assert input_kind(model, loss_fn, config, negatives, optimizer) == kind
    autograd = input_kind(model, loss_fn, config, negatives)  # no optimizer: the autograd loss, never row gradients
    assert autograd == ("scores" if kind == "row_gradients" else kind)


def test_a_loss_that_sets_nothing_takes_the_scores(tiny):
    class Plain(Loss):
        Args = NoArgs

        def __call__(self, batch: LossInput):
            return batch.pos_scores.mean()

    config = resolve({"model": "mf", "dim": 8, "loss": "bpr", "optimizer": "rowwise_adagrad", "device": "cpu"})
    model = build_model(config, tiny, CPU)
    optimizer = run_optimizer(model, Plain(NoArgs()), config)
    for negatives in (shared(20), per_query(8, 1)):
        assert input_kind(model, Plain(NoArgs()), config, negatives, optimizer) == "scores"


def test_the_losses_of_a_users_model_take_histories():
    from recx.models.registry import MODELS

    users_models = [name for name in MODELS.builtins() if MODELS.get(name).runner == "users"]
    assert users_models
    for name in users_models:
        assert all("histories" in LOSSES.get(loss).takes for loss in MODELS.get(name).losses), name
