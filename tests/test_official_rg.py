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


# ---------------------------------------------------------------------------------------------------------------
# The authors' training loop (issue 43): tests/golden/official/rg_loop.json, written by bench/official/rg_loop.py
# running the unmodified RG2 run.py in RecStudio (its fit_loop, ALSDataset loaders, EarlyStopping) on a tiny ML-10M
# file until RecStudio stopped it. recx's trainer (`recx.training.fit.fit`, the alternating runner with
# `half_steps`) is started from the same factors on the same split and fed RecStudio's validation metric after each
# epoch; it must take the same half-steps, stop after the same epoch and keep the same one.

LOOP = json.loads((Path(__file__).parent / "golden" / "official" / "rg_loop.json").read_text())


def run_recstudio_loop(name: str, tmp_path):
    """recx's fit as the RG2 config the golden ran (RecStudio's ids - 1); returns (records, selected epoch,
    factors after fit)."""
    from rich.progress import Progress

    from recx.config.run_config import resolve
    from recx.data.dataset import Dataset
    from recx.training.build import build_model
    from recx.training.fit import FitHooks, fit

    official, train_config = LOOP[name], LOOP["config_overrides"]["train"]
    n_users, n_items = official["n_users"], official["n_items"]

    def split(key: str) -> CSR:
        pairs = torch.tensor(official[key]) - 1
        return CSR.from_pairs(pairs[:, 0], pairs[:, 1], n_users, n_items)

    dataset = Dataset("loop", n_users, n_items, split("train"), split("valid"), split("train"), {}, "hash", Path("."))
    metric = next(key for key in official["epochs"][0] if key.startswith("ndcg@"))
    config = resolve(
        {
            "model": name,
            "dim": LOOP["config_overrides"]["model"]["embed_dim"],
            "epochs": train_config["epochs"],
            "patience": train_config["early_stop_patience"],
            "half_steps": True,
            "valid_metric": metric,
            "device": "cpu",
            "model_args": {
                "weights": "hyper",
                "form": "official",
                "alpha": train_config["alpha"],
                "beta": train_config["beta"] if name == "rgx" else 0.0,
                "regularization": train_config["lambda"],
                "solver": "cholesky",
                "dtype": "float64",
            },
        }
    )
    model = build_model(config, dataset, torch.device("cpu"))
    model.user_factors.data = torch.tensor(official["initial"]["user_table"], dtype=torch.float64)
    model.item_factors.data = torch.tensor(official["initial"]["item_table"], dtype=torch.float64)
    metrics = [epoch[metric] for epoch in official["epochs"]]
    records: list[dict] = []

    def validate(model, report) -> float:  # RecStudio's validation metric after this epoch
        assert len(records) < len(metrics), f"recx trains past epoch {len(metrics)}, where RecStudio stopped"
        return metrics[len(records)]

    def log_epoch(record: dict) -> None:
        records.append({**record, "users": model.user_factors.clone(), "items": model.item_factors.clone()})

    with Progress(disable=True) as progress:
        selected = fit(config, dataset, model, progress, FitHooks(validate, log_epoch, tmp_path / "checkpoint.pt", 0))
    return records, selected, model


@pytest.mark.parametrize("name", ["rg2", "rgx"])
def test_half_step_loop_and_stopping_are_recstudios(name, tmp_path):
    """RG2's run.py in RecStudio: epoch e solves the users (e even: the user loader, QᵀQ read at the epoch's start)
    or the items (e odd: the transposed loader, Pᵀ diag(|I_u|/2N) P), in batches of 3 rows, validated after every
    epoch; EarlyStopping (patience 2, mode max) keeps the epoch of the best metric, a tie counting as an improvement
    (>=), and stops after `patience` epochs without one. Against recx's fit with `half_steps: true`: the factors
    after each epoch (rtol 1e-6), the number of epochs run, the epoch kept and the factors fit leaves. Pins the
    loop around the golden-tested half-steps: the users' half-step first, one half-step per epoch alternating, the
    stopping rule and the epoch kept. (The official loss is a constant 0: nothing to compare.)"""
    official = LOOP[name]
    records, selected, model = run_recstudio_loop(name, tmp_path)
    for epoch, (record, expected) in enumerate(zip(records, official["epochs"], strict=False), start=1):
        for table, key in (("users", "user_table"), ("items", "item_table")):
            torch.testing.assert_close(
                record[table],
                torch.tensor(expected[key], dtype=torch.float64),
                rtol=1e-6,
                atol=1e-12,
                msg=lambda m, table=table, epoch=epoch: f"epoch {epoch} {table}: {m}",
            )
    assert len(records) == len(official["epochs"]), "epochs run before stopping"
    assert selected == official["best_epoch"] + 1, "the epoch kept (recx counts epochs from 1)"
    best = official["best"]
    torch.testing.assert_close(model.user_factors.data, torch.tensor(best["user_table"], dtype=torch.float64))
    torch.testing.assert_close(model.item_factors.data, torch.tensor(best["item_table"], dtype=torch.float64))
