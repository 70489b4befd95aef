"""RG² and RG× against the authors' code (tests/golden/official/rg.json, written by bench/official/rg.py from
yuanhao53/RG2's `training_step`): one user half-step, then one item half-step, exact solves, float64, rtol 1e-8.

Catches any difference from the official updates (form official, the registered default): the user ridge
λ(|I_u|/2 + α N) (+ λ for RG²), the item ridge λ(Σ_u |I_u|/2N + α M), the item right-hand side's +Σ_u |I_u|/2N P_u
(form text has λ(|I_u|/2 + α |I_u|), λ(Σ_u |I_u|/2N + α |U_i|) and −Σ_u |I_u|/2N P_u), β's (1 − β) on the
Gramians, and the targets (1/2 + α on observed pairs, −|I_u|/2N elsewhere).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from recx.data.csr import CSR
from recx.models.registry import MODELS

GOLDEN = json.loads((Path(__file__).parent / "golden" / "official" / "rg.json").read_text())


def official(name: str, figure: str) -> torch.Tensor:
    return torch.tensor(GOLDEN[name][figure], dtype=torch.float64)


def one_iteration(name: str, form: str) -> tuple[torch.Tensor, torch.Tensor]:
    given = GOLDEN["input"]
    pairs = torch.tensor(given["pairs"])
    train = CSR.from_pairs(pairs[:, 0], pairs[:, 1], given["n_users"], given["n_items"])
    model_class = MODELS.get(name)
    args = model_class.Args(
        weights="hyper",
        form=form,
        alpha=given["alpha"],
        beta=given["beta"] if name == "rgx" else 0.0,
        regularization=given["lambda"],
        solver="cholesky",
        dtype="float64",
    )
    model = model_class(given["n_users"], given["n_items"], given["dim"], args)
    model.user_factors.data = torch.tensor(given["user_factors"], dtype=torch.float64)
    model.item_factors.data = torch.tensor(given["item_factors"], dtype=torch.float64)
    problem = model.weighted_squares(train)
    model.solve_users(problem)
    users = model.user_factors.data.clone()
    model.solve_items(problem)
    return users, model.item_factors.data.clone()


@pytest.mark.parametrize("name", ["rg2", "rgx"])
def test_half_steps_equal_the_official_code(name):
    users, items = one_iteration(name, "official")
    torch.testing.assert_close(users, official(name, "users_after_user_step"), rtol=1e-8, atol=1e-12)
    torch.testing.assert_close(items, official(name, "items_after_item_step"), rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("name", ["rg2", "rgx"])
def test_text_form_differs_from_the_official_code(name):
    users, items = one_iteration(name, "text")
    assert not torch.allclose(users, official(name, "users_after_user_step"), rtol=1e-3)
    assert not torch.allclose(items, official(name, "items_after_item_step"), rtol=1e-3)
