"""recx's DNS(M, N) and Softmax-v(ρ, N) against the official hard-negative-sampling code (swt-user/WWW_2023_code;
tests/golden/official/hns.json, written by bench/official/hns.py from a checkout): one training step with BPR summed
over the batch and the negatives (`reduction: sum`, the official `reduction=False`) on a float64 MF, from the same
N uniform candidates per query (recx's `uniform_candidates` returns the official fixed draws): DNS's kept negatives,
Softmax-v's weights, the loss and its gradients w.r.t. both tables, to 1e-8, through autograd and through BPR's
compiled row gradients; and the law of the candidates against counts of the official sampler's own draws.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest
import torch
from official_helpers import LOOP_RTOL, assert_epoch_tables, f64
from scipy import stats

from recx.config.run_config import resolve
from recx.data.csr import CSR
from recx.data.dataset import Dataset
from recx.samplers import dns as dns_module
from recx.samplers import softmax_v as softmax_v_module
from recx.samplers.candidates import uniform_candidates
from recx.training.build import build_loss, build_model, build_sampler
from recx.training.runners.interactions import run_optimizer
from recx.training.step import sample_negatives, train_step, training_loss

GOLDEN = json.loads((Path(__file__).parent / "golden" / "official" / "hns.json").read_text())
INPUTS = GOLDEN["inputs"]
CANDIDATES = torch.tensor(INPUTS["candidates"])
RTOL = 1e-8


def use_official_candidates(monkeypatch, module) -> None:
    """The sampler module's uniform candidates replaced by the official fixed draws."""

    def official_candidates(sampler, users, n, exclude_train, max_redraws):
        assert (n, exclude_train) == (CANDIDATES.shape[1], False)
        return CANDIDATES.clone()

    monkeypatch.setattr(module, "uniform_candidates", official_candidates)


def golden_setup(sampler_name: str, sampler_args: dict, n_items: int, **settings):
    """(config, dataset, model) on the golden batch and tables; `n_items` >= the golden's 9 pads the catalogue with
    items no candidate draws (zero rows)."""
    users, items = torch.tensor(INPUTS["users"]), torch.tensor(INPUTS["items"])
    train = CSR.from_pairs(users, items, INPUTS["n_users"], n_items)
    dataset = Dataset("golden", INPUTS["n_users"], n_items, train, None, train, {}, "hash", Path("."))
    config = resolve(
        {
            "model": "mf",
            "dim": len(INPUTS["user_table"][0]),
            "loss": "bpr",
            "optimizer": "adam",
            "loss_args": {"reduction": "sum"},
            "sampler": sampler_name,
            "sampler_args": {"n_candidates": CANDIDATES.shape[1], "exclude_train": False, **sampler_args},
            "model_args": {"init": "normal", "init_std": 0.1, "scoring": "dot"},
            **settings,
        }
    )
    model = build_model(config, dataset, torch.device("cpu")).double()
    user_table, item_table = model.embedding_tables()[:2]
    with torch.no_grad():
        user_table.copy_(f64(INPUTS["user_table"]))
        item_table.zero_()
        item_table[: INPUTS["n_items"]] = f64(INPUTS["item_table"])
    return config, dataset, model


def step(monkeypatch, module, sampler_name: str, sampler_args: dict) -> dict:
    """One recx training step on the golden tables with the official candidates; returns the loss, the table
    gradients and the sampler's negatives."""
    use_official_candidates(monkeypatch, module)
    config, dataset, model = golden_setup(sampler_name, sampler_args, INPUTS["n_items"])
    users, items = torch.tensor(INPUTS["users"]), torch.tensor(INPUTS["items"])
    user_table, item_table = model.embedding_tables()[:2]
    sampler = build_sampler(config, dataset, torch.Generator().manual_seed(0))
    drawn = []
    original = sampler.sample
    sampler.sample = lambda batch: drawn.append(original(batch)) or drawn[-1]
    loss = training_loss(model, sampler, build_loss(config, dataset, torch.device("cpu")), config, users, items)
    loss.backward()
    return {
        "loss": loss.detach(),
        "grad_users": user_table.grad.to_dense(),
        "grad_items": item_table.grad.to_dense(),
        "negatives": drawn[0],
    }


def assert_matches(recx: dict, official: dict) -> None:
    assert recx["loss"].item() == pytest.approx(official["loss"], rel=RTOL)
    for key in ("grad_users", "grad_items"):
        torch.testing.assert_close(recx[key], f64(official[key]), rtol=RTOL, atol=1e-12)


@pytest.mark.parametrize("m", sorted(GOLDEN["dns"], key=int))
def test_dns_keeps_the_official_top_m_and_sums_their_bpr(monkeypatch, m):
    """loss_type 1: the M highest-scored of the N candidates, BPR summed over them and the batch. Catches keeping
    the lowest scores, or a mean over the M negatives (M > 1) or over the batch."""
    official = GOLDEN["dns"][m]
    recx = step(monkeypatch, dns_module, "dns", {"m": int(m)})
    kept = torch.gather(CANDIDATES, 1, torch.tensor(official["kept_positions"]))
    assert torch.equal(recx["negatives"].items.sort(1).values, kept.sort(1).values)
    assert_matches(recx, official)


@pytest.mark.parametrize("m", sorted(GOLDEN["dns"], key=int))
def test_dns_compiled_row_gradients_are_the_official_sum(monkeypatch, m):
    """DNS + BPR on dot-scored MF with a row-sparse optimizer takes the compiled row gradients (`BPR.row_gradients`,
    recx.kernels.bpr_rows; the step's input "row_gradients"), not autograd. On the golden batch with the catalogue
    padded to 64 items no candidate draws (so that gathering rows pays, as on a real catalogue), one `train_step` with
    row-sparse SGD at lr 1 moves each table by minus its gradient: the loss and both tables' moves are the official
    loss and gradients. Catches a mean over the queries and the negatives in that path where the official
    `reduction=False` sums (the autograd tests above do not take it)."""
    official = GOLDEN["dns"][m]
    settings = {"optimizer": "sgd", "lr": 1.0, "weight_decay": 0.0}
    use_official_candidates(monkeypatch, dns_module)
    config, dataset, model = golden_setup("dns", {"m": int(m)}, 64, **settings)
    users, items = torch.tensor(INPUTS["users"]), torch.tensor(INPUTS["items"])
    loss_fn = build_loss(config, dataset, torch.device("cpu"))
    compiled = []
    row_gradients = loss_fn.row_gradients
    loss_fn.row_gradients = lambda *args: compiled.append(row_gradients(*args)) or compiled[-1]
    tables = model.embedding_tables()[:2]
    before = [table.detach().clone() for table in tables]
    sampler = build_sampler(config, dataset, torch.Generator().manual_seed(0))
    loss = train_step(model, sampler, loss_fn, run_optimizer(model, loss_fn, config), config, users, items)
    assert len(compiled) == 1, "the step did not take the compiled row gradients"
    assert loss.item() == pytest.approx(official["loss"], rel=RTOL)
    moves = [start - table.detach() for start, table in zip(before, tables, strict=True)]
    torch.testing.assert_close(moves[0], f64(official["grad_users"]), rtol=RTOL, atol=1e-12)
    n_items = INPUTS["n_items"]
    torch.testing.assert_close(moves[1][:n_items], f64(official["grad_items"]), rtol=RTOL, atol=1e-12)
    assert not moves[1][n_items:].any()


def homogeneity_p_value(recx_counts: np.ndarray, official_counts: np.ndarray) -> float:
    """Chi-square test that two samples' counts over the same cells come from one law (cells empty in both left
    out)."""
    table = np.stack([recx_counts.ravel(), official_counts.ravel()])
    return float(stats.chi2_contingency(table[:, table.sum(0) > 0]).pvalue)


def test_dns_candidates_follow_the_official_sampler_law(monkeypatch):
    """The law of DNS's N uniform candidates (with `exclude_train: false`, as the official code and the experiments
    draw) against 2,000 seeded calls of the official unmodified `base_sampler.forward` on the golden batch
    (`candidate_law`: uniform over all items, positives included, with replacement): recx draws as many rows (the
    batch repeated 2,000 times, one `sample`), and two chi-square homogeneity tests at p > 1e-3 compare the counts
    per (query, item) (44 degrees of freedom) and the rows' numbers of distinct items. The first detects a law that
    moves 0.03 of one query's probability from one item to another with power 0.9996 (0.97 at 0.025, 0.69 at 0.02):
    positives excluded (1/9 or 2/9 of a row moved) or an item never drawn fail by far; the second catches draws
    without replacement (every row 6 distinct items, where 11% of the official rows are)."""
    law = GOLDEN["candidate_law"]
    drawn = []

    def recorded(*args):
        drawn.append(uniform_candidates(*args))
        return drawn[-1]

    monkeypatch.setattr(dns_module, "uniform_candidates", recorded)
    config, dataset, model = golden_setup("dns", {"m": 1}, INPUTS["n_items"])
    assert config.sampler_args["n_candidates"] == law["n_candidates"]
    batch = len(INPUTS["users"])
    users = torch.tensor(INPUTS["users"]).repeat(law["seeds"])
    positives = torch.tensor(INPUTS["items"]).repeat(law["seeds"])
    sampler = build_sampler(config, dataset, torch.Generator().manual_seed(0))
    sample_negatives(model, sampler, users, positives)
    (candidates,) = drawn
    counts = torch.zeros(batch, INPUTS["n_items"], dtype=torch.int64)
    counts.index_put_((torch.arange(users.numel())[:, None] % batch, candidates), torch.tensor(1), accumulate=True)
    distinct = np.bincount([row.unique().numel() for row in candidates], minlength=law["n_candidates"] + 1)
    p_items = homogeneity_p_value(counts.numpy(), np.array(law["counts"]))
    assert p_items > 1e-3, f"counts per (query, item) differ from the official draws' (p = {p_items:.2e})"
    p_distinct = homogeneity_p_value(distinct, np.array(law["distinct_per_row"]))
    assert p_distinct > 1e-3, f"distinct items per row differ from the official draws' (p = {p_distinct:.2e})"


@pytest.mark.parametrize("rho", sorted(GOLDEN["softmax_v"], key=float))
def test_softmax_v_weights_and_loss_are_the_official_ones(monkeypatch, rho):
    """loss_type 2: w = softmax(L / τ) over the N candidates, L = -log σ(s_i - s_j), τ = sqrt(Var(L) / (2ρ)) with
    the sample variance, no gradient through w; Σ_j w_j L_j summed over the batch. Catches the population variance,
    τ without the 2, or a mean over the candidates or the batch."""
    official = GOLDEN["softmax_v"][rho]
    recx = step(monkeypatch, softmax_v_module, "softmax_v", {"rho": float(rho)})
    assert torch.equal(recx["negatives"].items, CANDIDATES)
    torch.testing.assert_close(recx["negatives"].weights, f64(official["weights"]), rtol=RTOL, atol=1e-15)
    assert_matches(recx, official)


# ---------------------------------------------------------------------------------------------------------------
# The official training loop (issue 43): tests/golden/official/hns_loop.json, written by bench/official/hns_loop.py
# running the unmodified main_more.py as __main__ for 3 epochs with every permutation and randint draw recorded.
# recx's trainer (`recx.training.fit.fit`: the interactions runner, its dense Adam, its StepLR) is fed the same
# initial tables, each epoch's order and each batch's candidates, and must end each epoch with the official tables
# and loss.

LOOP = json.loads((Path(__file__).parent / "golden" / "official" / "hns_loop.json").read_text())
FLAGS = ("--fix_seed", "--weighted")  # main_more.py's flags without a value


def loop_arguments(case: str) -> dict[str, str]:
    """main_more.py's arguments of a case (`--fix_seed` and `--weighted` take no value)."""
    tokens = [token for token in shlex.split(LOOP["cases"][case]["arguments"]) if token not in FLAGS]
    return dict(zip(tokens[::2], tokens[1::2], strict=True))


def loop_config(case: str, sampler: str, sampler_args: dict):
    """recx's settings for main_more.py's arguments: MF with dot scores, BPR summed over the batch and the kept
    candidates (`--reduction` False), N uniform candidates from all items, dense Adam with coupled weight decay on
    both whole tables every step, StepLR(step_size, gamma) stepped after each epoch."""
    args = loop_arguments(case)
    assert args["--model"] == "0" and args["--sampler"] == "0" and "--reduction" not in args
    return resolve(
        {
            "model": "mf",
            "dim": int(args["--dims"]),
            "loss": "bpr",
            "loss_args": {"reduction": "sum"},
            "optimizer": "adam",
            "sampler": sampler,
            "sampler_args": {"n_candidates": int(args["--sample_num"]), "exclude_train": False, **sampler_args},
            "model_args": {"init": "normal", "init_std": 0.1, "scoring": "dot"},
            "epochs": int(args["--epoch"]),
            "batch_size": int(args["--batch_size"]),
            "lr": float(args["--learning_rate"]),
            "weight_decay": float(args["--weight_decay"]),
            "weight_decay_mode": "full",
            "lr_step_epochs": int(args["--step_size"]),
            "lr_step_gamma": float(args["--gamma"]),
            "device": "cpu",
        }
    )


def run_hns_loop(case: str, module, config, monkeypatch, tmp_path) -> list[dict]:
    """recx's `fit` on the official split from the official initial tables, each epoch's pairs in the official
    permutation's order, each batch's candidates the official `torch.randint` draws (checked to be asked for as
    many per query, from all items); returns each epoch's record with the tables after it."""
    from rich.progress import Progress

    from recx.training.fit import FitHooks, fit
    from recx.training.runners.interactions import InteractionEpochs

    official = LOOP["cases"][case]
    n_users, n_items = LOOP["inputs"]["n_users"], LOOP["inputs"]["n_items"]
    users, items = torch.tensor(official["train"]["users"]), torch.tensor(official["train"]["items"])
    train = CSR.from_pairs(users, items, n_users, n_items)
    dataset = Dataset("loop", n_users, n_items, train, None, train, {}, "hash", Path("."))
    model = build_model(config, dataset, torch.device("cpu")).double()
    user_table, item_table = model.embedding_tables()[:2]
    with torch.no_grad():
        user_table.copy_(f64(official["initial"]["user_table"]))
        item_table.copy_(f64(official["initial"]["item_table"]))
    position = {pair: k for k, pair in enumerate(zip(train.row_ids().tolist(), train.indices.tolist(), strict=True))}
    coo = list(zip(users.tolist(), items.tolist(), strict=True))
    orders = [torch.tensor([position[coo[k]] for k in permutation]) for permutation in official["permutations"]]
    monkeypatch.setattr(InteractionEpochs, "shuffled", lambda runner, n: orders.pop(0))
    steps = list(official["steps"])

    def official_candidates(sampler, batch_users, n, exclude_train, max_redraws):
        step = steps.pop(0)
        assert (n, exclude_train) == (len(step["candidates"][0]), False)
        assert batch_users.tolist() == step["users"]
        return torch.tensor(step["candidates"])

    monkeypatch.setattr(module, "uniform_candidates", official_candidates)
    records: list[dict] = []

    def log_epoch(record: dict) -> None:
        records.append({**record, "user_table": user_table.detach().clone(), "item_table": item_table.detach().clone()})

    with Progress(disable=True) as progress:
        fit(config, dataset, model, progress, FitHooks(None, log_epoch, tmp_path / "checkpoint.pt", 0))
    assert not orders and not steps
    return records


def assert_hns_epochs(records: list[dict], case: str) -> None:
    """Each epoch's tables and loss (recx records the mean of the steps' losses, main_more.py their sum `loss_`)."""
    official = LOOP["cases"][case]
    per_epoch = len(official["steps"]) // len(official["epochs"])
    assert_epoch_tables(records, official["epochs"], ("user_table", "item_table"))
    for epoch, (record, expected) in enumerate(zip(records, official["epochs"], strict=True), start=1):
        assert record["loss"] * per_epoch == pytest.approx(expected["loss_sum"], rel=LOOP_RTOL), f"epoch {epoch} loss"


def test_dns_training_loop_is_the_official_run(monkeypatch, tmp_path):
    """main_more.py --sampler 0 --weighted --loss_type 1 --lambda_w 2 --sample_num 5 for 3 epochs (24 training
    pairs, batch 7: batches of 7, 7, 7 and 3), Adam lr 0.05 with coupled weight decay 0.01, StepLR(1, 0.5): the tables
    after each epoch and its loss. Pins the loop around the golden-tested DNS step: a new order every epoch (fed in),
    the last partial batch trained, the candidates drawn per batch and the top 2 kept from the tables as the previous
    step left them, BPR summed over the batch and the kept candidates, the weight decay reaching every row of both
    tables every step, and the learning rate stepped once per epoch, after it."""
    config = loop_config("dns", "dns", {"m": int(float(loop_arguments("dns")["--lambda_w"]))})
    assert_hns_epochs(run_hns_loop("dns", dns_module, config, monkeypatch, tmp_path), "dns")


def test_softmax_v_training_loop_is_the_official_run(monkeypatch, tmp_path):
    """main_more.py --sampler 0 --weighted --loss_type 2 --lambda_w 1.0 --sample_num 5 for 3 epochs, as the DNS loop:
    the tables after each epoch and its loss. Pins Softmax-v's weights computed per batch from the tables as the
    previous step left them (detached), its weighted BPR summed over the batch, and the same optimizer and schedule."""
    config = loop_config("softmax_v", "softmax_v", {"rho": float(loop_arguments("softmax_v")["--lambda_w"])})
    assert_hns_epochs(run_hns_loop("softmax_v", softmax_v_module, config, monkeypatch, tmp_path), "softmax_v")
