"""recx against the FastVAE paper's official code (HERECJ/FastVae_Gpu), float64, on the figures
`bench/official/fastvae.py` wrote to tests/golden/official/fastvae.json (the input is stored there too).

The official items are 1-based (0 pads the user histories); recx's are 0-based with no padding."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import torch
from official_helpers import LOOP_ATOL, LOOP_RTOL

import recx.samplers.codebooks as codebooks
import recx.samplers.kmeans as kmeans_module
from recx.config.run_config import resolve
from recx.data.csr import CSR
from recx.data.dataset import Dataset
from recx.losses.user_softmax import full_softmax_nll, sampled_softmax_nll
from recx.models.multvae import MultVAE
from recx.samplers.base import Batch, Negatives
from recx.samplers.kmeans import kmeans
from recx.samplers.registry import SAMPLERS
from recx.sweeps.experiments import experiment_spec, load_experiments, plan
from recx.training.build import build_model
from recx.training.runners.users import UserEpochs

GOLDEN = json.loads((Path(__file__).parent / "golden" / "official" / "fastvae.json").read_text())
DATA = GOLDEN["input"]
TIGHT = {"rtol": 1e-8, "atol": 1e-12}


def tensor(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def history_pairs() -> tuple[torch.Tensor, torch.Tensor]:
    """(row, 1-based item) of every non-padding entry of the padded positives."""
    padded = torch.tensor(DATA["positives"])
    rows, columns = torch.nonzero(padded, as_tuple=True)
    return rows, padded[rows, columns]


def test_fastvae_sampled_softmax_matches_the_official_loss_function():
    """`VAE_Sampler.loss_function` given the same draws and log q: Σ over a user's positives of
    log(exp(o_i - log q_i) + Σ_{j ∈ Φ_u} exp(o_j - log q_j)) - (o_i - log q_i), the negatives shared by the user's
    positives; the loss and the gradients of the query and of the item table. Catches a change of the per-user
    sharing of negatives, of the logQ correction's sign or of the reduction (a sum over users and positives)."""
    rows, positives = history_pairs()
    padded = torch.tensor(DATA["positives"])
    query = tensor(DATA["query"]).requires_grad_()
    item_table = tensor(DATA["item_table"])[1:].requires_grad_()
    negatives = Negatives(torch.tensor(DATA["negatives"]) - 1, tensor(DATA["negative_log_q"]), torch.zeros(3))
    positive_log_q = tensor(DATA["positive_log_q"])[padded > 0]
    loss = sampled_softmax_nll(query, item_table, rows, positives - 1, positive_log_q, negatives)
    loss.backward()
    expected = GOLDEN["sampled_softmax"]
    assert loss.item() == pytest.approx(expected["loss"], rel=1e-12)
    assert torch.allclose(query.grad, tensor(expected["grad_query"]), **TIGHT)
    assert torch.allclose(item_table.grad, tensor(expected["grad_item_table"])[1:], **TIGHT)


def test_multvae_full_softmax_matches_the_official_loss_function():
    """`BaseVAE.decode` + `loss_function`: Σ over (user, positive) of -log softmax(query · W + b)[positive] with the
    output bias b in the training logits. The official softmax also spans its padding column 0 (by design recx's
    spans the M items only), so the padding column is passed here as one more item. Catches a dropped output bias
    or a different reduction."""
    rows, positives = history_pairs()
    z = tensor(DATA["z"]).requires_grad_()
    weight = tensor(DATA["output_weight"]).requires_grad_()
    bias = tensor(DATA["output_bias"]).requires_grad_()
    query = z @ tensor(DATA["decoder_weight"]).T + tensor(DATA["decoder_bias"])
    loss = full_softmax_nll(query, weight, rows, positives, bias)
    loss.backward()
    expected = GOLDEN["full_softmax"]
    assert loss.item() == pytest.approx(expected["loss"], rel=1e-12)
    assert torch.allclose(z.grad, tensor(expected["grad_z"]), **TIGHT)
    assert torch.allclose(weight.grad, tensor(expected["grad_output_weight"]), **TIGHT)
    assert torch.allclose(bias.grad, tensor(expected["grad_output_bias"]), **TIGHT)


def official_multvae_row() -> dict:
    """The run settings of experiments.yaml's fastvae-table3 `mult-vae` row (the official recipe)."""
    path = Path(__file__).resolve().parents[1] / "experiments.yaml"
    return load_experiments(path)["experiments"]["fastvae-table3"]["methods"]["mult-vae"]


def test_multvae_step_matches_the_official_forward_configured_as_the_official_row(monkeypatch):
    """`BaseVAE.forward` + `kl_loss`, one step of run_mm.py's `train_model`, against `UserEpochs.batch_objective` with
    fastvae-table3's `mult-vae` model_args (dropout on the normalised history sum, no encoder bias, the output bias,
    no KL gradient), fed the official dropout mask and noise ε: μ and log σ², the KL summed over the batch, the loss
    and the gradients of every parameter. recx's item 0 plays the official padding column (held by no user), so the
    softmaxes span the same columns. Catches the history sum divided by |I_u| instead of √|I_u|, dropout placed on
    the input entries (its mask is drawn with another shape), a missing 1/(1 - p), a KL other than
    ½ Σ (σ² + μ² - 1 - log σ²), and a KL gradient the official step does not take (anneal_cap > 0)."""
    expected = GOLDEN["encoder_forward"]
    rows, items = history_pairs()
    n_users, n_items = len(DATA["positives"]), len(DATA["encoder_table"])
    train = CSR.from_pairs(rows, items, n_users, n_items)
    dataset = Dataset("encoder", n_users, n_items, train, None, train, {}, "hash", Path("."))
    row = official_multvae_row()
    config = resolve(
        {
            "model": row["model"],
            "loss": row["loss"],
            "dim": len(DATA["z"][0]),
            "batch_size": n_users,
            "model_args": {**row["model_args"], "hidden": len(DATA["encoder_table"][0])},
        }
    )
    assert config.model_args["dropout"] == expected["dropout"]
    model = build_model(config, dataset, torch.device("cpu")).double()
    assert isinstance(model, MultVAE)
    with torch.no_grad():
        model.encoder_in.copy_(tensor(DATA["encoder_table"]))
        model.encoder_out.weight.copy_(tensor(DATA["encoder_weight"]))
        model.encoder_out.bias.copy_(tensor(DATA["encoder_bias"]))
        model.decoder.weight.copy_(tensor(DATA["decoder_weight"]))
        model.decoder.bias.copy_(tensor(DATA["decoder_bias"]))
        model.items.copy_(tensor(DATA["output_weight"]))
        model.item_bias.copy_(tensor(DATA["output_bias"]))
    keep, noise = torch.tensor(expected["dropout_keep"]), tensor(expected["noise"])

    def official_draw(values: torch.Tensor, name: str):
        def draw(shape, **kwargs):
            assert tuple(shape) == values.shape, f"torch.{name}{tuple(shape)}: the official draw is {values.shape}"
            return values.clone()

        return draw

    monkeypatch.setattr(torch, "rand", official_draw(keep.double(), "rand"))  # kept: 1 >= p, dropped: 0 < p
    monkeypatch.setattr(torch, "randn", official_draw(noise, "randn"))
    users = torch.arange(n_users)
    runner = UserEpochs(config, dataset, model, torch.Generator().manual_seed(0))
    runner.updates = config.model_args["anneal_steps"]  # β at its cap: the row's 0, as the official KL.item()
    mu, log_var = model.posterior(users, runner.generator)
    torch.testing.assert_close(mu, tensor(expected["mu"]), **TIGHT)
    torch.testing.assert_close(log_var, tensor(expected["log_var"]), **TIGHT)
    kl = model.kl_divergence(mu, log_var).sum()
    assert kl.item() == pytest.approx(expected["kl"], rel=1e-12)
    objective = runner.batch_objective(users)
    objective.backward()
    assert objective.item() == pytest.approx(expected["loss"], rel=1e-12)
    gradients = {
        "encoder_table": model.encoder_in.grad,
        "encoder_weight": model.encoder_out.weight.grad,
        "encoder_bias": model.encoder_out.bias.grad,
        "decoder_weight": model.decoder.weight.grad,
        "decoder_bias": model.decoder.bias.grad,
        "output_weight": model.items.grad,
        "output_bias": model.item_bias.grad,
    }
    for name, grad in gradients.items():
        torch.testing.assert_close(
            grad, tensor(expected[f"grad_{name}"]), **TIGHT, msg=lambda m, name=name: f"{name}: {m}"
        )


@pytest.mark.parametrize("case", ["midx", "midx_slow"])
def test_kmeans_matches_the_official_kmeans_from_the_same_start(case):
    """`kmeans` from the same initial centroids (the MIDX constructors' `num_cluster` tensor), both halves of the
    item table: Lloyd's iterations until the squared error falls by less than 1e-6 of itself."""
    table = tensor(DATA[f"{case}_item_table"])
    generator = torch.Generator().manual_seed(0)  # no cluster empties on these inputs: nothing random is drawn
    for part, half in enumerate(codebooks.split_halves(table)):
        centroids, labels = kmeans(half, tensor(DATA[f"{case}_initial_centroids"]), 300, 1e-6, generator)
        assert torch.equal(labels, torch.tensor(GOLDEN[case]["assignments"][part]))
        assert torch.allclose(centroids, tensor(GOLDEN[case]["codewords"][part]), **TIGHT)


KMEANS = json.loads((Path(__file__).parent / "golden" / "official" / "fastvae_kmeans.json").read_text())


def test_kmeans_stops_where_the_official_relative_rule_stops(monkeypatch):
    """`kmeans` from the official start with the MIDX samplers' default iterations and tolerance, on the input of
    `bench/official/fastvae_kmeans.py`: stop when L_prev - L < L_prev · 1e-6, L the squared error
    (sampler_gpu_mm.py:30 at the golden's commit). L is ~2e5 and falls by 0.12 (5e-7 of L) at pass 5, where the
    official loop stops; an absolute rule, L_prev - L < 1e-6, runs on to pass 9 and 3 other assignments. The
    centroids, the assignments and the pass recx stopped at (its centroid updates + 1)."""
    assert KMEANS["absolute_rule"]["passes"] != KMEANS["passes"]
    updates = []
    sums = kmeans_module.cluster_sums_of
    monkeypatch.setattr(kmeans_module, "cluster_sums_of", lambda *args: updates.append(1) or sums(*args))
    args = SAMPLERS.get("midx_uni").Args()
    points = tensor(KMEANS["points"])
    generator = torch.Generator().manual_seed(0)  # no cluster empties on this input: nothing random is drawn
    centroids, labels = kmeans(
        points, points[KMEANS["start"]], args.kmeans_iterations, args.kmeans_tolerance, generator
    )
    assert len(updates) + 1 == KMEANS["passes"], (
        f"recx stopped at pass {len(updates) + 1}, the official at {KMEANS['passes']}"
    )
    assert torch.equal(labels, torch.tensor(KMEANS["assignments"]))
    assert torch.allclose(centroids, tensor(KMEANS["centroids"]), **TIGHT)


def dataset_with_counts(counts: list[int]) -> Dataset:
    """A training set in which item i has counts[i] interactions (user u holds the items with count > u)."""
    pairs = [(user, item) for item, count in enumerate(counts) for user in range(count)]
    rows, columns = torch.tensor(pairs).T
    train = CSR.from_pairs(rows, columns, max(counts), len(counts))
    return Dataset("counts", max(counts), len(counts), train, None, train, {}, "hash", Path("."))


@pytest.mark.parametrize(
    "name, official, atol",
    [
        ("midx_uni", "midx_uni", 1e-12),
        # MidxUniPop mode 0: log(count + 1) exactly; the official casts it to float32 (6e-8 relative)
        ("midx_pop", "midx_pop_mode0", 2e-7),
        # MidxUniPop mode 1, the default run_mm.py uses: log(count + 1) + 1e-6, at most 1.5e-6 apart in log w here
        ("midx_pop", "midx_pop_mode1", 3e-6),
    ],
)
def test_midx_log_q_matches_the_official_proposal(name, official, atol, monkeypatch):
    """The proposal's log q of every item for fixed queries and item table, the codebooks built by recx's default
    rebuild from the official initial centroids; the official `compute_item_p` drops the per-query normaliser
    (it cancels in the loss), so it is normalised here over the items. Catches midx_pop's popularity weight
    (recx's default was count + 1, the paper and the official code use log(count + 1)) and codebooks built
    otherwise than the official k-means."""
    initial = tensor(DATA["midx_initial_centroids"])
    monkeypatch.setattr(codebooks, "random_points", lambda points, n, generator: initial)
    table, query = tensor(DATA["midx_item_table"]), tensor(DATA["midx_query"])
    sampler_class = SAMPLERS.get(name)
    dataset = dataset_with_counts(DATA["midx_counts"])
    sampler = sampler_class(
        dataset, 5, sampler_class.Args(n_codewords=initial.shape[0]), torch.Generator().manual_seed(0), "torch"
    )
    sampler.rebuild(None, table)
    every_item = torch.arange(table.shape[0]).expand(query.shape[0], -1)
    log_q = sampler.log_probability(
        Batch(torch.zeros(2, dtype=torch.int64), every_item[:, 0], query, table), every_item
    )
    unnormalised = tensor(GOLDEN["midx"][f"{official}_unnormalised_log_q"])
    expected = unnormalised - torch.logsumexp(unnormalised, dim=1, keepdim=True)
    assert torch.allclose(log_q, expected, rtol=0, atol=atol)


def test_midx_rebuild_runs_kmeans_as_long_as_the_official_code(monkeypatch):
    """A MIDX sampler's rebuild with its default arguments, from the official initial centroids, on a table whose
    first half takes the official kmeans 27 passes (`passes` in the golden): the codewords and assignments of
    `MidxUniform.__init__`. Catches a cap below the official max_iter of 300 that the input reaches (20, as the
    faiss-based codebooks ran), in `kmeans` or in the samplers' default `kmeans_iterations`."""
    assert max(GOLDEN["midx_slow"]["passes"]) > 20
    initial = tensor(DATA["midx_slow_initial_centroids"])
    monkeypatch.setattr(codebooks, "random_points", lambda points, n, generator: initial)
    table = tensor(DATA["midx_slow_item_table"])
    sampler_class = SAMPLERS.get("midx_uni")
    dataset = dataset_with_counts([1] * table.shape[0])
    sampler = sampler_class(
        dataset, 5, sampler_class.Args(n_codewords=initial.shape[0]), torch.Generator().manual_seed(0), "torch"
    )
    sampler.rebuild(None, table)
    for part in range(2):
        expected = torch.tensor(GOLDEN["midx_slow"]["assignments"][part])
        torch.testing.assert_close(sampler.codebooks.assignments[part], expected, rtol=0, atol=0)
        torch.testing.assert_close(
            sampler.codebooks.codewords[part], tensor(GOLDEN["midx_slow"]["codewords"][part]), **TIGHT
        )


# ---------------------------------------------------------------------------------------------------------------
# The official training loop (issue 43): tests/golden/official/fastvae_loop.json, written by
# bench/official/fastvae_loop.py running the unmodified run_mm.py for 3 epochs with every draw recorded. recx's
# trainer (`recx.training.fit.fit`, the users runner, its Adam and StepLR, the sampler's rebuild before each epoch),
# configured by fastvae-samplers' rows, is fed the same users, dropout masks, ε, k-means starts and negatives from
# the official initial parameters, and must end each epoch with the official parameters and loss.

LOOP = json.loads((Path(__file__).parent / "golden" / "official" / "fastvae_loop.json").read_text())
# official parameter -> recx parameter (the Embedding tables' padding row 0 is left out where recx has no padding)
LOOP_PARAMETERS = {
    "encode_layer_0.weight": "encoder_in",
    "encode_layer_1.weight": "encoder_out.weight",
    "encode_layer_1.bias": "encoder_out.bias",
    "decode_layer_0.weight": "decoder.weight",
    "decode_layer_0.bias": "decoder.bias",
    "_Item_Embeddings.weight": "items",
    "_Item_Embeddings.bias": "item_bias",
}


def run_mm_arguments(case: str) -> dict[str, list[str]]:
    """run_mm.py's arguments of a case: each flag with the values that follow it."""
    parsed: dict[str, list[str]] = {}
    for token in shlex.split(LOOP[case]["run_mm_arguments"]):
        if token.startswith("-"):
            flag = parsed.setdefault(token, [])
        else:
            flag.append(token)
    return parsed


def samplers_row(case: str):
    """fastvae-samplers' row for the case (its model, loss and model, sampler and loss arguments)."""
    path = Path(__file__).resolve().parents[1] / "experiments.yaml"
    runs = plan(experiment_spec(load_experiments(path), "fastvae-samplers", path), "fastvae-samplers", path)
    name = {"multvae": "mult-vae"}.get(case, case)
    (run,) = [run for run in runs if run.method == name]
    return run.config


def loop_setup(case: str):
    """(config, dataset, model, official→recx parameter reader): the official sizes and optimiser settings, the
    row's method options; recx's item i is the official item i (Mult-VAE: recx's item 0 plays the padding column,
    held by no user) or i + 1 (FastVAE)."""
    args, row = run_mm_arguments(case), samplers_row(case)
    hidden, latent = (int(value) for value in args["-d"])
    sampler_args = dict(row.sampler_args)
    if row.model == "fastvae":
        sampler_args["n_codewords"] = int(args["--cluster_num"][0])
    config = resolve(
        {
            "model": row.model,
            "loss": row.loss,
            "sampler": row.sampler,
            "dim": latent,
            "n_negatives": int(args["-s"][0]),
            "batch_size": int(args["-b"][0]),
            "epochs": int(args["-e"][0]),
            "lr": float(args["-lr"][0]),
            "weight_decay": float(args["-w"][0]),
            "lr_step_epochs": int(args["--step_size"][0]),
            "lr_step_gamma": float(args["--gamma"][0]),
            "device": "cpu",
            "model_args": {**row.model_args, "hidden": hidden},
            "sampler_args": sampler_args,
            "loss_args": row.loss_args,
        }
    )
    padding = config.model == "multvae"
    pairs = torch.tensor(LOOP[case]["train"])
    n_items = LOOP["n_items"] + padding
    train = CSR.from_pairs(pairs[:, 0], pairs[:, 1] + padding, LOOP["n_users"], n_items)
    dataset = Dataset("loop", LOOP["n_users"], n_items, train, None, train, {}, "hash", Path("."))
    model = build_model(config, dataset, torch.device("cpu")).double()

    def as_recx(name: str, values) -> torch.Tensor:
        value = tensor(values)
        return value[1:] if name in ("encode_layer_0.weight", "_Item_Embeddings.weight") and not padding else value

    return config, dataset, model, as_recx


class ProxyTorch:
    """`torch` for one recx module, with some functions answered from recorded draws."""

    def __init__(self, **functions):
        self.functions = functions

    def __getattr__(self, name):
        return self.functions.get(name) or getattr(torch, name)


def recorded(values: list, name: str, as_tensor):
    def draw(shape, **kwargs):
        value = as_tensor(values.pop(0))
        assert tuple(shape) == value.shape, f"recx draws {name}{tuple(shape)}, the official code {tuple(value.shape)}"
        return value

    return draw


def run_official_loop(case: str, monkeypatch, tmp_path) -> tuple[list[dict], dict]:
    from rich.progress import Progress

    import recx.models.multvae as multvae_module
    import recx.samplers.midx as midx_module
    import recx.training.runners.users as users_module
    from recx.training.fit import FitHooks, fit

    official = LOOP[case]
    config, dataset, model, as_recx = loop_setup(case)
    recx_parameters = dict(model.named_parameters())
    with torch.no_grad():
        for name, values in official["initial"].items():
            recx_parameters[LOOP_PARAMETERS[name]].copy_(as_recx(name, values))
    users, keep, noise = list(official["users"]), list(official["dropout_keep"]), list(official["noise"])
    starts, negatives = list(official["kmeans_starts"]), list(official["negatives"])
    n_users = dataset.n_users

    def official_order(runner, n):
        assert torch.equal(runner.users, torch.arange(n_users)) and n == n_users
        order = torch.tensor(users[:n_users])
        del users[:n_users]
        return order

    def official_start(points, n, generator):
        assert starts, "recx runs k-means more often than the official loop (one MIDX build per epoch)"
        return points[torch.tensor(starts.pop(0))]

    def official_negatives(log_joint, *args):
        drawn = torch.tensor(negatives.pop(0)) - 1
        assert drawn.shape == (log_joint.shape[0], config.n_negatives)
        return drawn

    monkeypatch.setattr(users_module.UserEpochs, "shuffled", official_order)
    # kept: 1 >= p, dropped: 0 < p
    monkeypatch.setattr(multvae_module, "torch", ProxyTorch(rand=recorded(keep, "rand", lambda v: tensor(v))))
    monkeypatch.setattr(users_module, "torch", ProxyTorch(randn=recorded(noise, "randn", tensor)))
    monkeypatch.setattr(codebooks, "random_points", official_start)
    monkeypatch.setattr(midx_module, "draw_cells_and_items", official_negatives)
    records: list[dict] = []

    def log_epoch(record: dict) -> None:
        records.append({**record, **{name: value.detach().clone() for name, value in model.named_parameters()}})

    with Progress(disable=True) as progress:
        fit(config, dataset, model, progress, FitHooks(None, log_epoch, tmp_path / "checkpoint.pt", 0))
    assert not starts, "recx runs k-means less often than the official loop (one MIDX build per epoch)"
    assert not (users or keep or noise or negatives), "an official draw was not used"
    return records, as_recx


def assert_official_loop(case: str, records: list[dict], as_recx) -> None:
    """Each epoch's parameters and loss (recx records the mean over steps of the step's sum over its users divided
    by their number; the official loop logs the sum of the steps' sums)."""
    official = LOOP[case]
    batch = int(run_mm_arguments(case)["-b"][0])
    sizes = [min(batch, LOOP["n_users"] - start) for start in range(0, LOOP["n_users"], batch)]
    assert len(records) == len(official["epochs"])
    for epoch, (record, expected) in enumerate(zip(records, official["epochs"], strict=True), start=1):
        for name, values in expected.items():
            torch.testing.assert_close(
                record[LOOP_PARAMETERS[name]],
                as_recx(name, values),
                rtol=LOOP_RTOL,
                atol=LOOP_ATOL,
                msg=lambda m, name=name, epoch=epoch: f"epoch {epoch} {name}: {m}",
            )
        losses = official["losses"][(epoch - 1) * len(sizes) : epoch * len(sizes)]
        expected_loss = sum(loss / size for loss, size in zip(losses, sizes, strict=True)) / len(sizes)
        assert record["loss"] == pytest.approx(expected_loss, rel=LOOP_RTOL), f"epoch {epoch} loss"


@pytest.mark.parametrize("case", ["multvae", "midx_uni", "midx_pop"])
def test_training_loop_is_the_official_run_mm(case, monkeypatch, tmp_path):
    """run_mm.py --sampler 0 (Mult-VAE), 3 (MIDX_Uni) or 4 (MIDX_Pop) for 3 epochs (6 users, batches of 4 and 2),
    Adam lr 0.01 with weight decay 0.01 on every parameter, StepLR(1, 0.5) after each epoch, against recx's `fit`
    with fastvae-samplers' row for the method: the parameters after each epoch and its loss. Pins the loop around
    the golden-tested step: the users' batches (the official order fed in), the weight decay reaching every
    parameter, the learning rate stepped once per epoch after its steps, the dropout and ε drawn per batch, and for
    FastVAE the MIDX codebooks re-clustered before each epoch's first step from the item table the previous epoch
    left (from the official k-means start), the proposal's log q of the official negatives and positives."""
    records, as_recx = run_official_loop(case, monkeypatch, tmp_path)
    assert_official_loop(case, records, as_recx)
