"""recx's WRMF against implicit's ALS as a user runs it: `AlternatingLeastSquares()` with no argument, then `fit`
(issue 43). tests/golden/official/wrmf_loop.json comes from `bench/official/wrmf_loop.py` (its "command" key) with
benfred/implicit 0.7.3: the default constructor's settings, the initial draws its `fit` made, implicit's own training
loss after each half-step of its 15 iterations, and the factors after some of them, once as constructed (float32)
and once from the same draws in float64.

recx's trainer (`recx.training.fit.fit`: the alternating runner, one user and one item half-step an epoch) trains the
`wrmf` model configured as implicit's defaults: the settings whose recx defaults differ by design are set
(`SET_BY_DESIGN`), every other one is left to recx's default (`LEFT_TO_RECX`), so that a recx default drifting from
implicit's fails here. recx's own initialisation is fed implicit's draws (torch.rand stands in for the generator).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from recx.config.run_config import resolve
from recx.data.csr import CSR
from recx.data.dataset import Dataset
from recx.training.build import build_model

GOLDEN = json.loads((Path(__file__).parent / "golden" / "official" / "wrmf_loop.json").read_text())
INPUTS = GOLDEN["inputs"]
DEFAULTS = GOLDEN["default"]["defaults"]
# implicit's default -> recx's setting, where recx's default differs by design (recx's defaults in brackets): the
# factors (dim 64), the iterations (epochs 30), alpha (40), confidence alpha x r (linear: 1 + alpha, Hu et al.),
# and the regularization (0.05) as implicit's solver receives it: its Cython signature takes a C float, so
# λ = 0.01 is solved as float32(0.01) (recx with 0.01 differs by 2e-8 in λ: ~1e-8 in the factors)
SET_BY_DESIGN = {
    "dim": DEFAULTS["factors"],
    "epochs": DEFAULTS["iterations"],
    "model_args": {
        "alpha": DEFAULTS["alpha"],
        "confidence": "scaled",
        "regularization": float(np.float32(DEFAULTS["regularization"])),
    },
}
# implicit's defaults that recx's defaults are (not set above): conjugate gradient with 3 steps per row, float32
# factors, uniform [0, 0.01) starts (fit's random(...) * 0.01), an iteration = the users' then the items' half-step
LEFT_TO_RECX = {"solver": "cg", "cg_steps": DEFAULTS["cg_steps"], "dtype": DEFAULTS["dtype"], "init_scale": 0.01}


def dataset() -> Dataset:
    rows = [user for user, items in enumerate(INPUTS["interactions"]) for _ in items]
    columns = [item for items in INPUTS["interactions"] for item in items]
    n_users, n_items = INPUTS["n_users"], INPUTS["n_items"]
    train = CSR.from_pairs(torch.tensor(rows), torch.tensor(columns), n_users, n_items)
    return Dataset("loop", n_users, n_items, train, None, train, {}, "hash", Path("."))


def config(**model_args):
    """recx's run: wrmf with SET_BY_DESIGN (and `model_args`), everything else recx's default."""
    return resolve(
        {
            "model": "wrmf",
            "device": "cpu",
            **SET_BY_DESIGN,
            "model_args": {**SET_BY_DESIGN["model_args"], **model_args},
        }
    )


def run_recx(run_config, monkeypatch, tmp_path) -> tuple[object, list[dict]]:
    """recx's model initialised by its own code from implicit's draws, then `fit`; (model, each epoch's record with
    the factors after it)."""
    from rich.progress import Progress

    from recx.training.fit import FitHooks, fit

    data = dataset()
    draws = [torch.tensor(draw, dtype=torch.float64) for draw in GOLDEN["default"]["draws"]]

    def implicit_draws(*shape, dtype=None, **kwargs):
        draw = draws.pop(0)
        assert tuple(shape) == tuple(draw.shape)
        return draw.to(dtype)

    with monkeypatch.context() as patch:
        patch.setattr(torch, "rand", implicit_draws)
        model = build_model(run_config, data, torch.device("cpu"))
    assert not draws
    records: list[dict] = []

    def log_epoch(record: dict) -> None:
        factors = {
            "user_factors": model.user_factors.detach().clone(),
            "item_factors": model.item_factors.detach().clone(),
        }
        records.append({**record, **factors})

    with Progress(disable=True) as progress:
        fit(run_config, data, model, progress, FitHooks(None, log_epoch, tmp_path / "checkpoint.pt", 0))
    return model, records


def assert_official_run(records: list[dict], official: dict, rtol: float, atol: float) -> None:
    """The factors at each snapshot and every epoch's loss. recx records the mean of its two half-steps' losses, each
    the weighted squared loss over the training interactions; implicit's `calculate_loss` divides the same sum by
    Σ confidence + (users x items - interactions)."""
    interactions = sum(len(items) for items in INPUTS["interactions"])
    scale = (DEFAULTS["alpha"] * interactions + INPUTS["n_users"] * INPUTS["n_items"] - interactions) / interactions
    half_steps = official["half_step_losses"]
    assert len(records) == DEFAULTS["iterations"] and len(half_steps) == 2 * len(records)
    for epoch, record in enumerate(records, start=1):
        expected = (half_steps[2 * epoch - 2] + half_steps[2 * epoch - 1]) / 2 * scale
        assert record["loss"] == pytest.approx(expected, rel=rtol), f"epoch {epoch} loss"
    for snapshot in official["snapshots"]:
        record = records[snapshot["iteration"] - 1]
        for name in ("user_factors", "item_factors"):
            torch.testing.assert_close(
                record[name].double(),
                torch.tensor(snapshot[name], dtype=torch.float64),
                rtol=rtol,
                atol=atol,
                msg=lambda m, name=name, epoch=snapshot["iteration"]: f"epoch {epoch} {name}: {m}",
            )


def test_recx_defaults_left_unset_are_implicits():
    """Every setting of implicit's default constructor that the configuration above does not set is recx's default:
    conjugate gradient with implicit's 3 steps per row, float32 factors, starts uniform in [0, 0.01), and an epoch
    of a user then an item half-step (not RG's alternate half-steps). Catches a recx default drifting from
    implicit's (e.g. cg_steps or dtype) in an experiment row that relies on it."""
    run_config = config()
    for key, value in LEFT_TO_RECX.items():
        assert run_config.model_args[key] == value, key
    assert not run_config.half_steps
    assert DEFAULTS["use_cg"] and DEFAULTS["use_native"] and not DEFAULTS["calculate_training_loss"]
    assert DEFAULTS["random_state"] is None  # fresh entropy: the golden's draws are recorded, not reseeded


def test_default_constructor_fit_in_float64_is_recx_fit(monkeypatch, tmp_path):
    """implicit's `AlternatingLeastSquares().fit` from its recorded draws in float64 (the factors' dtype is the
    solver's) against recx's wrmf (dtype float64, everything else as above) through its trainer: the factors after
    iterations 1, 2, 3 and 15 and the loss of each of the 15 epochs, to 1e-6 (measured ~1e-10 relative). Pins the
    loop around the golden-tested half-steps: the users' half-step before the items' in every epoch, the number of
    CG steps, the confidence α r, the ridge, the starts (draws x init_scale), and the epoch's loss as the mean of
    the loss after each half-step."""
    _, records = run_recx(config(dtype="float64"), monkeypatch, tmp_path)
    assert_official_run(records, GOLDEN["float64"], rtol=1e-6, atol=1e-9)


def test_default_constructor_fit_is_recx_default_precision(monkeypatch, tmp_path):
    """The same as implicit's default run, float32 both: the initial factors exactly (recx's init of implicit's
    draws), then the factors after iterations 1 and 15 and every epoch's loss to float32 CG's agreement (the two
    codes sum in different orders: ~4e-6 apart after 15 iterations, measured)."""
    model, records = run_recx(config(), monkeypatch, tmp_path)
    assert model.user_factors.dtype == torch.float32
    assert_official_run(records, GOLDEN["default"], rtol=1e-4, atol=2e-5)


def test_recx_init_is_implicits_start_from_the_same_draws(monkeypatch):
    """recx's initialisation of implicit's draws is the start implicit's first half-step read, to the bit (float32:
    draw x 0.01)."""
    data = dataset()
    draws = [torch.tensor(draw, dtype=torch.float32) for draw in GOLDEN["default"]["draws"]]
    monkeypatch.setattr(torch, "rand", lambda *shape, dtype=None, **kwargs: draws.pop(0).to(dtype))
    model = build_model(config(), data, torch.device("cpu"))
    initial = GOLDEN["default"]["initial"]
    for name in ("user_factors", "item_factors"):
        want = torch.tensor(initial[name], dtype=torch.float32)
        torch.testing.assert_close(getattr(model, name).detach(), want, rtol=0, atol=0)
