"""recx's DirectAU, MAWU and PRISM initialisation against the official code's figures (issue 22).

tests/golden/official/prism.json comes from `bench/official/prism.py` (its "command" key): the PRISM authors' training
step (snap-research/PRISM, which produced the PRISM paper's Table 1), DirectAU's release (THUwangcy/DirectAU) and
MAWU's (psm1206/MAWU, with its own DirectAU), on a fixed batch with repeated users and items. Losses and gradients
w.r.t. the embedding tables (and the margin tables) are compared in float64 at rtol 1e-8.
"""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from recx.losses.base import LossInput
from recx.losses.directau import DirectAU, DirectAUArgs
from recx.losses.mawu import MAWU, MAWUArgs
from recx.models.init import init_table, prism_norms

GOLDEN = json.loads((Path(__file__).parent / "golden" / "official" / "prism.json").read_text())
INPUTS = GOLDEN["inputs"]
RTOL, ATOL = 1e-8, 1e-12


def _tables(margins: bool, suffix: str = "") -> dict[str, torch.Tensor]:
    """The golden tables (and margin tables: the inputs `user_margin{suffix}`, `item_margin{suffix}`) as leaves."""
    names = ["user_table", "item_table"] + (["user_margin", "item_margin"] if margins else [])
    inputs = {name: INPUTS[name + suffix if "margin" in name else name] for name in names}
    return {name: torch.tensor(values, dtype=torch.float64, requires_grad=True) for name, values in inputs.items()}


def _batch(tables) -> LossInput:
    users, items = torch.tensor(INPUTS["users"]), torch.tensor(INPUTS["items"])
    zeros = torch.zeros(len(users), dtype=torch.float64)
    return LossInput(
        zeros,
        zeros[:, None],
        zeros,
        zeros[:, None],
        None,
        users,
        items,
        tables["user_table"][users],
        tables["item_table"][items],
    )


def _compare(case: dict, loss: torch.Tensor, tables: dict, prefix: str = "") -> None:
    """The loss and the tables' gradients against the case's `{prefix}loss` and `{prefix}grad_*` (zeroed after)."""
    assert loss.item() == pytest.approx(case[f"{prefix}loss"], rel=RTOL, abs=ATOL)
    loss.backward()
    for name, table in tables.items():
        want = torch.tensor(case[f"{prefix}grad_{name}"], dtype=torch.float64)
        assert torch.allclose(table.grad, want, rtol=RTOL, atol=ATOL), (name, (table.grad - want).abs().max().item())
        table.grad = None


def _directau(case_key: str, **args) -> None:
    tables = _tables(margins=False)
    loss = DirectAU(DirectAUArgs(gamma=INPUTS["gamma"], **args))(_batch(tables))
    _compare(GOLDEN["cases"][case_key], loss, tables)


def _mawu(case_key: str, margins: str = "", **args) -> dict[str, torch.Tensor]:
    """recx's MAWU from the margin inputs `*_margin{margins}`, compared with the case (with `margins`: its first
    call, then the second); returns the tables."""
    tables = _tables(margins=True, suffix=margins)
    loss = MAWU(
        MAWUArgs(gamma_user=INPUTS["gamma_user"], gamma_item=INPUTS["gamma_item"], **args),
        SimpleNamespace(n_users=len(INPUTS["user_margin"]), n_items=len(INPUTS["item_margin"])),
    )
    loss.user_margin, loss.item_margin = tables["user_margin"], tables["item_margin"]
    if margins:
        _compare(GOLDEN["cases"][case_key], loss(_batch(tables)), tables, "first_")
    _compare(GOLDEN["cases"][case_key], loss(_batch(tables)), tables)
    return tables


def test_directau_default_is_the_prism_code_uniformity_over_distinct_users_and_items():
    """Catches uniformity over every batch row (a user once per interaction) where the PRISM authors' code, which
    produced Table 1's DirectAU rows, takes one row per distinct user and item (its train.py torch.unique)."""
    _directau("prism_align")


@pytest.mark.parametrize("case_key", ["directau", "mawu_directau"])
def test_directau_batch_rows_is_the_directau_release(case_key):
    """`uniformity_rows: batch` against THUwangcy/DirectAU and psm1206/MAWU's DirectAU (pdist over all rows)."""
    _directau(case_key, uniformity_rows="batch")


def test_mawu_default_is_the_prism_code_broadcast_alignment_and_distinct_rows():
    """Catches the per-pair alignment -mean_b cos(θ_b + m_b) where both official codes broadcast an angle [B] with a
    margin [B, 1] into -mean_{a,b} cos(θ_b + m_a), and uniformity over every batch row where the PRISM code takes
    distinct users and items; also the lower-triangle uniformity form and the margin gradients."""
    _mawu("prism_mawu")


def test_mawu_batch_rows_is_the_mawu_release():
    """`uniformity_rows: batch` (broadcast alignment) against psm1206/MAWU's MAWU.calculate_loss."""
    _mawu("mawu", uniformity_rows="batch")


@pytest.mark.parametrize("case_key, rows", [("prism_mawu_outside", "unique"), ("mawu_outside", "batch")])
def test_mawu_projects_margins_outside_the_unit_interval_as_the_official_codes(case_key, rows):
    """From margins in [-0.8, 1.8] (as an optimizer step can leave them): both official codes compute the loss with
    the margins as they are, then clip them onto [0, 1] in place, before the backward pass and the step; so does recx.
    Its first call's loss and gradients are the official first call's, the margins it leaves those the official clip
    leaves, and its second call the official second. Catches margins never projected, projected onto another
    interval, or projected before the loss that reads them."""
    tables = _mawu(case_key, margins="_outside", uniformity_rows=rows)
    for name in ("user_margin", "item_margin"):
        projected = torch.tensor(GOLDEN["cases"][case_key][f"projected_{name}"], dtype=torch.float64)
        torch.testing.assert_close(tables[name].detach(), projected, rtol=0, atol=0)


def test_prism_norms_and_initial_row_norms_match_the_prism_code():
    """PRISM's magnitudes α log(d + 2) + (1 - α) by training degree (zero-degree rows included) and the initial
    row norms of both tables; the directions are random in both codes and not compared. rtol 1e-6 for the row
    norms: recx's tables are float32."""
    case = GOLDEN["cases"]["prism_init"]
    edges = torch.tensor(case["edges"])
    degrees = {
        "user": torch.bincount(edges[0], minlength=case["n_users"]),
        "item": torch.bincount(edges[1], minlength=case["n_items"]),
    }
    for alpha in case["alphas"]:
        official = case[f"alpha_{alpha}"]
        for side, d in degrees.items():
            norms = prism_norms(d, alpha)
            assert torch.allclose(norms, torch.tensor(official[f"{side}_mag"], dtype=torch.float64), rtol=RTOL, atol=0)
            table = init_table(len(d), case["dim"], "prism", 0.1, d, alpha).to(torch.float64)
            want = torch.tensor(official[f"{side}_row_norms"], dtype=torch.float64)
            assert torch.allclose(table.norm(dim=1), want, rtol=1e-6, atol=0)
