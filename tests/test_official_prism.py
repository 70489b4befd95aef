"""recx's DirectAU, MAWU and PRISM initialisation against the official code's figures (issue 22).

tests/golden/official/prism.json comes from `bench/official/prism.py` (its "command" key): the PRISM authors' training
step (snap-research/PRISM, which produced the PRISM paper's Table 1), DirectAU's release (THUwangcy/DirectAU) and
MAWU's (psm1206/MAWU, with its own DirectAU), on a fixed batch with repeated users and items. Losses and gradients
w.r.t. the embedding tables (and the margin tables) are compared in float64 at rtol 1e-8.
"""

import json
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from official_helpers import LOOP_RTOL, assert_epoch_tables, f64

from recx.config.run_config import resolve
from recx.data.csr import CSR
from recx.data.dataset import Dataset
from recx.losses.base import LossInput
from recx.losses.directau import DirectAU, DirectAUArgs
from recx.losses.mawu import MAWU, MAWUArgs
from recx.models.init import init_table, prism_norms
from recx.samplers.base import Negatives, Sampler
from recx.training.build import build_loss, build_model

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


# ---------------------------------------------------------------------------------------------------------------
# The official training loop (issue 43): tests/golden/official/prism_loop.json, written by
# bench/official/prism_loop.py running PRISM's unmodified train.py main() for 3 epochs (MF, 30 training edges in
# the split's stored order, batch 7: four batches of 7 and one of 2 per epoch) with its randint draws recorded.
# recx's trainer (`recx.training.fit.fit`: the interactions runner, its dense Adam with coupled weight decay) is fed
# the same initial parameters, the loader's order and the same negatives, and must end each epoch with the official
# parameters and loss.

LOOP = json.loads((Path(__file__).parent / "golden" / "official" / "prism_loop.json").read_text())


def loop_arguments(case: str) -> dict[str, str]:
    """train.py's arguments of a case (every flag given takes a value)."""
    tokens = shlex.split(LOOP["cases"][case]["arguments"])
    return dict(zip(tokens[::2], tokens[1::2], strict=True))


def loop_dataset() -> Dataset:
    edges = torch.tensor(LOOP["inputs"]["train"])
    n_users, n_items = LOOP["inputs"]["n_users"], LOOP["inputs"]["n_items"]
    train = CSR.from_pairs(edges[0], edges[1], n_users, n_items)
    return Dataset("loop", n_users, n_items, train, None, train, {}, "hash", Path("."))


def loop_config(case: str, loss: str, **settings):
    """recx's settings for train.py's arguments: MF, dense Adam with coupled weight decay on every row every step
    (`weight_decay_mode: full`), the batch size, epochs and learning rate of the case."""
    args = loop_arguments(case)
    return resolve(
        {
            "model": "mf",
            "dim": int(args["--hidden_dim"]),
            "loss": loss,
            "optimizer": "adam",
            "sampler": "uniform",
            "n_negatives": max(int(args["--neg_ratio"]), 1),
            "epochs": int(args["--epochs"]),
            "batch_size": int(args["--batch_size"]),
            "lr": float(args["--lr"]),
            "weight_decay": float(args["--weight_decay"]),
            "weight_decay_mode": "full",
            "device": "cpu",
            **settings,
        }
    )


class OfficialNegatives(Sampler):
    """Stands in for the sampler: each step's negatives are the official loop's, `n_id[torch.randint(...)]` (the
    batch's item nodes indexed by the recorded draws), laid out as train.py lays them: negative k of query b is draw
    k·B + b (`pos_edge_label_index[0].repeat(neg_ratio)`, then `preds.chunk(neg_ratio + 1)`). They may hold the
    query's own positive (drawn from the batch's items) and are kept: the official losses mask nothing. Checks that
    each step trains the official batch."""

    def __init__(self, steps: list[dict], n_negatives: int):
        self.steps, self.n_negatives, self.rebuild_every = list(steps), n_negatives, None

    def sample(self, batch) -> Negatives:
        step = self.steps.pop(0)
        assert batch.users.tolist() == step["users"] and batch.positives.tolist() == step["items"]
        draws = torch.tensor(step["negative_draws"]).view(self.n_negatives, -1).T
        items = torch.tensor(step["item_n_id"])[draws]
        zeros = torch.zeros(items.shape, dtype=torch.float64)
        return Negatives(items, zeros, zeros[:, 0], keeps_positive=True)


def run_prism_loop(case: str, config, monkeypatch, tmp_path, official_negatives: bool) -> list[dict]:
    """recx's `fit` from the official initial parameters, each epoch's interactions in the official loader's order
    (the split's order, the same every epoch: PRISM's loader does not shuffle); with `official_negatives`, the
    official negatives (OfficialNegatives). Returns each epoch's record with the parameters after it."""
    from rich.progress import Progress

    from recx.training.fit import FitHooks, fit
    from recx.training.runners import interactions

    official = LOOP["cases"][case]
    dataset = loop_dataset()
    model = build_model(config, dataset, torch.device("cpu")).double()
    user_table, item_table = model.embedding_tables()[:2]
    with torch.no_grad():
        user_table.copy_(f64(official["initial"]["user_table"]))
        item_table.copy_(f64(official["initial"]["item_table"]))
    losses = []

    def loss_from_official_start(config, dataset, device):
        loss_fn = build_loss(config, dataset, device)
        if "user_margin" in official["initial"]:
            loss_fn.user_margin = torch.nn.Parameter(f64(official["initial"]["user_margin"]))
            loss_fn.item_margin = torch.nn.Parameter(f64(official["initial"]["item_margin"]))
        losses.append(loss_fn)
        return loss_fn

    monkeypatch.setattr(interactions, "build_loss", loss_from_official_start)
    if official_negatives:
        negatives = OfficialNegatives(official["steps"], config.n_negatives)
        monkeypatch.setattr(interactions, "build_sampler", lambda *args: negatives)
    train = dataset.train
    position = {pair: k for k, pair in enumerate(zip(train.row_ids().tolist(), train.indices.tolist(), strict=True))}
    order = torch.tensor([position[pair] for pair in zip(*LOOP["inputs"]["train"], strict=True)])
    monkeypatch.setattr(interactions.InteractionEpochs, "shuffled", lambda runner, n: order)
    records: list[dict] = []

    def log_epoch(record: dict) -> None:
        params = {"user_table": user_table.detach().clone(), "item_table": item_table.detach().clone()}
        for name in ("user_margin", "item_margin"):
            if hasattr(losses[0], name):
                params[name] = getattr(losses[0], name).detach().clone()
        records.append({**record, **params})

    with Progress(disable=True) as progress:
        fit(config, dataset, model, progress, FitHooks(None, log_epoch, tmp_path / "checkpoint.pt", 0))
    if official_negatives:
        assert not negatives.steps
    return records


def assert_prism_epochs(records: list[dict], case: str) -> None:
    """Each epoch's parameters, and its loss: recx records the mean of its steps' losses, train.py the mean weighted
    by each step's number of scored pairs ((1 + neg_ratio) x the batch's size); both are checked, recx's against
    the official steps' losses."""
    official = LOOP["cases"][case]
    per_epoch = len(official["steps"]) // len(official["epochs"])
    assert_epoch_tables(records, official["epochs"], ("user_table", "item_table", "user_margin", "item_margin"))
    for epoch, (record, expected) in enumerate(zip(records, official["epochs"], strict=True), start=1):
        steps = official["steps"][(epoch - 1) * per_epoch : epoch * per_epoch]
        step_losses = [step["loss"] for step in steps]
        sizes = [len(step["users"]) for step in steps]
        weighted = sum(loss * size for loss, size in zip(step_losses, sizes, strict=True)) / sum(sizes)
        assert weighted == pytest.approx(expected["loss"], rel=1e-12)
        assert record["loss"] == pytest.approx(sum(step_losses) / per_epoch, rel=LOOP_RTOL), f"epoch {epoch} loss"


def test_bpr_training_loop_is_the_official_run(monkeypatch, tmp_path):
    """train.py --loss BPR --neg_ratio 2 for 3 epochs: the tables after each epoch and its loss. Pins the loop around
    the BPR loss: the batches of the loader's order (fed in), the last partial batch trained, one Adam step per batch
    over both whole tables with coupled weight decay (every row decays every step, rows outside the batch too), BPR
    averaged over every (query, negative) pair."""
    config = loop_config("bpr", "bpr", model_args={"scoring": "dot"}, loss_args={"reduction": "mean"})
    records = run_prism_loop("bpr", config, monkeypatch, tmp_path, official_negatives=True)
    assert_prism_epochs(records, "bpr")


def test_ssm_training_loop_is_the_official_run(monkeypatch, tmp_path):
    """train.py --loss SSM --neg_ratio 3 for 3 epochs: the tables after each epoch and its loss. Pins the loop around
    SSMLoss: cosine scores at τ 0.2 (the official `self.tau`), the negatives' layout (negative k of query b is the
    loop's draw k·B + b), softmax over the positive and its negatives averaged over the batch, and the optimizer as
    in the BPR loop."""
    config = loop_config(
        "ssm",
        "softmax",
        model_args={"scoring": "cosine", "temperature": 0.2},
        loss_args={"temperature": 1.0},
        sampler_args={"shared": False},
    )
    records = run_prism_loop("ssm", config, monkeypatch, tmp_path, official_negatives=True)
    assert_prism_epochs(records, "ssm")


def test_directau_training_loop_is_the_official_run(monkeypatch, tmp_path):
    """train.py --loss align --reg_types uniformity --gamma_vals 1.0 for 3 epochs: the tables after each epoch and
    its loss. Pins the loop around AlignmentLoss: uniformity over each batch's distinct users and items, the
    batches in the loader's order (a user's rows in several batches), Adam's coupled weight decay on every row
    every step, and no negatives (neg_ratio 0: recx's uniform draws are not read)."""
    config = loop_config("directau", "directau", loss_args={"gamma": float(loop_arguments("directau")["--gamma_vals"])})
    records = run_prism_loop("directau", config, monkeypatch, tmp_path, official_negatives=False)
    assert_prism_epochs(records, "directau")


def test_mawu_training_loop_is_the_official_run(monkeypatch, tmp_path):
    """train.py --loss MAWU --gamma_vals 2.6,1.4 for 3 epochs: the tables and margins after each epoch and its loss.
    Pins the loop around MAWULoss: Adam holds the margins beside the tables and decays them too
    (MAWU's `margin_decay: true`), they are clipped onto [0, 1] after the loss reads them and before the step, and the
    margins are read at the batch's local node ids (`margin_ids: batch_position`: RecModel.get_margins indexes the
    margin tables with the loader's relabelled edge_label_index)."""
    gamma_user, gamma_item = (float(g) for g in loop_arguments("mawu")["--gamma_vals"].split(","))
    config = loop_config(
        "mawu",
        "mawu",
        loss_args={
            "gamma_user": gamma_user,
            "gamma_item": gamma_item,
            "margin_ids": "batch_position",
            "margin_decay": True,
        },
    )
    records = run_prism_loop("mawu", config, monkeypatch, tmp_path, official_negatives=False)
    assert_prism_epochs(records, "mawu")
