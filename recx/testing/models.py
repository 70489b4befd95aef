"""The model contract (docs/design.md "Models"): representations whose inner product is the score; training."""

from __future__ import annotations

from pathlib import Path

import torch

from recx.config.run_config import resolve
from recx.models.registry import MODELS
from recx.testing.data import random_dataset
from recx.testing.runs import check_trains
from recx.training.build import build_model


def _model(name: str, args: dict, dataset, seed: int):
    return build_model(
        resolve({"model": name, "dim": 8, "seed": seed, "model_args": args}), dataset, torch.device("cpu")
    )


def check_model_api(name: str, args: dict | None = None) -> None:
    """`representations(users)` gives query [B, d] and items [n_items, d] on the model's device; `item_table()` and
    `query(users)` are the same values, detached; a repeated user gets the same query; the same seed, the same
    tables."""
    dataset = random_dataset(n_users=40, n_items=60, density=0.15)
    model = _model(name, args or {}, dataset, 0)
    shown = f"model {name!r} (model_args {args or {}})"
    users = torch.tensor([0, 3, 3, dataset.n_users - 1])
    query, items = model.representations(users)
    if query.shape[0] != users.numel() or items.shape[0] != dataset.n_items or query.shape[1] != items.shape[1]:
        raise AssertionError(f"{shown}: representations {tuple(query.shape)}, {tuple(items.shape)}")
    if not query.device == items.device == model.device:
        raise AssertionError(f"{shown}: representations off the model's device")
    table, detached = model.item_table(), model.query(users)
    if table.requires_grad or detached.requires_grad:
        raise AssertionError(f"{shown}: item_table() and query() must be detached")
    if not torch.allclose(table, items.detach()) or not torch.allclose(detached, query.detach()):
        raise AssertionError(f"{shown}: item_table() or query() differ from representations()")
    if not torch.allclose(detached[1], detached[2]):
        raise AssertionError(f"{shown}: a repeated user gets another query")
    everyone = torch.arange(dataset.n_users)
    first, second = _model(name, args or {}, dataset, 5), _model(name, args or {}, dataset, 5)
    if not torch.equal(first.query(everyone), second.query(everyone)) or not torch.equal(
        first.item_table(), second.item_table()
    ):
        raise AssertionError(f"{shown}: the same seed gives other tables")


def check_model(name: str, args: dict | None = None, *, run: dict | None = None, workdir: Path | None = None) -> None:
    """`check_model_api`, then two epochs (`run`: other settings, e.g. the loss it trains with); a model with
    nothing to train (`optimizers` and `losses` empty, no runner's epochs) must complete without epochs."""
    check_model_api(name, args)
    trains = MODELS.get(name).runner != "none"
    check_trains({"model": name, "model_args": args or {}, **(run or {})}, workdir, lowers_loss=trains)
