"""Golden figures from the FastVAE paper's official code (HERECJ/FastVae_Gpu) on a tiny fixed input (issue 22).

    python bench/official/fastvae.py --repo PATH [--out tests/golden/official/fastvae.json]

PATH is a checkout of the official repository (never vendored here). Its modules are imported from PATH and run on
the CPU in float64 (the device argument is "cpu", torch's default dtype float64; sklearn, imported but unused by
the functions called, is stubbed when missing). Figures, for the input stored beside them in the JSON:
- `VAE_Sampler.loss_function` (FastVAE's sampled softmax) given fixed negatives and log q for the positives and
  the negatives, as `VAE_Sampler.forward` scores them; the loss and its gradients for the query and the item table;
- `BaseVAE.decode` + `BaseVAE.loss_function` (Mult-VAE's full softmax, its padding column included) for a fixed
  latent z, with the gradients for z, the output weights and the output bias;
- `BaseVAE.forward` in training mode (the encoder: the history's embedding sum divided by √|I_u|, dropout p = 0.5 on
  it, ReLU, the layer giving (μ, log σ²); the reparameterisation; the decoder and the full softmax) and
  `BaseVAE.kl_loss`, one step as run_mm.py's `train_model` takes it (the KL added as a constant, `kl.item()`), for
  fixed weights: μ, log σ², the loss, the KL summed over the batch (anneal 1, `reduction=False`), the gradients of
  every parameter, and the dropout mask and the noise ε the official code drew under torch.manual_seed(23) (a seed
  whose mask keeps a positive hidden unit of every user), read off its `nn.Dropout` and `torch.randn_like`;
- `kmeans` from fixed initial centroids (the MIDX constructors accept them as `num_cluster`), the codewords and
  assignments of both halves of a fixed item table; and of a second table (`midx_slow`) whose first half needs 27
  passes of the official loop (more than the 20 iterations faiss was run for), with the passes of each half;
- `MidxUniform` / `MidxUniPop` (modes 0 and 1) `compute_item_p` for every item: the proposals' unnormalised
  log q (the samplers drop the per-query normaliser, which cancels in the loss).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import torch

FUNCTIONS = (
    "vae_models.py:VAE_Sampler.loss_function, vae_models.py:BaseVAE.decode, "
    "vae_models.py:BaseVAE.loss_function, vae_models.py:BaseVAE.forward, vae_models.py:BaseVAE.kl_loss, "
    "sampler_gpu_mm.py:kmeans, sampler_gpu_mm.py:MidxUniform.__init__, "
    "sampler_gpu_mm.py:MidxUniform.compute_item_p, sampler_gpu_mm.py:MidxUniPop.compute_item_p"
)

# 48 points of the plane from which the official kmeans, started at the first 4, takes 27 passes of its loop: found
# by a hill climb on that count from N(0, 1) points (a point moved at random, kept when the count did not fall)
SLOW_HALF = """
    -0.009 -0.234   0.925 0.048   -0.686 0.179   1.484 1.158   -0.419 -1.842   -0.794 -0.268   -2.259 -0.445   -1.414 -0.615
    -0.448 -0.613   1.1 2.677   -0.322 1.179   -0.838 1.257   0.523 0.072   -0.682 -0.485   0.132 0.68   -1.102 -0.233
    -0.508 0.192   -0.117 0.533   -0.654 -0.13   0.327 1.499   -2.374 2.112   1.533 1.053   0.179 -0.164   0.654 1.351
    3.146 0.869   0.405 -1.08   -0.98 1.372   -2.634 0.364   -0.123 0.412   -1.364 -0.938   -1.333 -1.096   1.772 -0.436
    -0.25 -0.948   2.365 0.709   0.633 -2.204   0.235 0.488   1.15 -0.308   1.786 -1.68   0 0.471   -0.168 2.628
    0.272 -0.708   0.069 -0.199   -1.249 1.059   0.426 1.356   -0.338 1.683   -0.491 0.602   -0.072 -1.035   0.263 1.078
"""


def make_input() -> dict:
    """The fixed input (rounded so that its JSON text is exact): items are 1-based with 0 the padding, as the
    official code numbers them."""
    rng = np.random.default_rng(22)
    n_items, hidden, latent, n_negatives = 8, 4, 2, 5
    midx_items, midx_dim, n_codewords = 32, 4, 4

    def values(*shape, scale=1.0):
        return np.round(rng.normal(0, scale, shape), 4).tolist()

    table = values(n_items + 1, hidden, scale=0.5)
    table[0] = [0.0] * hidden  # the Embedding's padding row
    midx_table = np.round(rng.uniform(-1, 1, (midx_items, midx_dim)), 2)
    data = {
        "positives": [[1, 4, 7, 0], [2, 3, 0, 0], [5, 6, 8, 3]],  # padded with 0
        "negatives": rng.integers(1, n_items + 1, (3, n_negatives)).tolist(),
        "positive_log_q": values(3, 4),
        "negative_log_q": values(3, n_negatives),
        "query": values(3, hidden),
        "item_table": table,
        "z": values(3, latent),
        "decoder_weight": values(hidden, latent, scale=0.5),
        "decoder_bias": values(hidden),
        "output_weight": values(n_items + 1, hidden, scale=0.5),
        "output_bias": values(n_items + 1, scale=0.1),
        "midx_item_table": midx_table.tolist(),
        "midx_query": values(2, midx_dim),
        "midx_initial_centroids": midx_table[:n_codewords, : midx_dim // 2].tolist(),
        "midx_counts": rng.integers(1, 50, midx_items).tolist(),
    }
    encoder_table = values(n_items + 1, hidden)
    encoder_table[0] = [0.0] * hidden  # the Embedding's padding row
    data.update(
        encoder_table=encoder_table,
        encoder_weight=values(2 * latent, hidden, scale=0.5),
        encoder_bias=values(2 * latent, scale=0.1),
    )
    slow_half = np.array(SLOW_HALF.split(), dtype=np.float64).reshape(-1, 2)
    data.update(
        midx_slow_item_table=np.hstack([slow_half, np.round(rng.normal(0, 1, slow_half.shape), 3)]).tolist(),
        midx_slow_initial_centroids=slow_half[:4].tolist(),
    )
    return data


def import_official(repo: Path):
    sys.path.insert(0, str(repo))
    try:
        import sklearn.cluster  # noqa: F401
    except ImportError:
        stub = types.ModuleType("sklearn")
        stub.cluster = types.ModuleType("sklearn.cluster")
        stub.cluster.KMeans = None
        sys.modules.update({"sklearn": stub, "sklearn.cluster": stub.cluster})
    import sampler_gpu_mm
    import vae_models

    return vae_models, sampler_gpu_mm


def tensor(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def sampled_softmax(vae_models, data: dict) -> dict:
    positives, negatives = torch.tensor(data["positives"]), torch.tensor(data["negatives"])
    table = tensor(data["item_table"])
    model = vae_models.VAE_Sampler(table.shape[0] - 1, [table.shape[1], 2])
    model._Item_Embeddings.weight.data.copy_(table)
    query = tensor(data["query"]).requires_grad_()
    positive_scores = (query.unsqueeze(1) * model._Item_Embeddings(positives)).sum(-1)  # as VAE_Sampler.forward
    negative_scores = (query.unsqueeze(1) * model._Item_Embeddings(negatives)).sum(-1)
    loss = model.loss_function(
        negative_scores, tensor(data["negative_log_q"]), positive_scores, tensor(data["positive_log_q"])
    )
    loss.backward()
    return {
        "loss": loss.item(),
        "grad_query": query.grad.tolist(),
        "grad_item_table": model._Item_Embeddings.weight.grad.tolist(),
    }


def full_softmax(vae_models, data: dict) -> dict:
    weight = tensor(data["output_weight"])
    model = vae_models.BaseVAE(weight.shape[0] - 1, [weight.shape[1], 2])
    model.decode_layer_0.weight.data.copy_(tensor(data["decoder_weight"]))
    model.decode_layer_0.bias.data.copy_(tensor(data["decoder_bias"]))
    model._Item_Embeddings.weight.data.copy_(weight)
    model._Item_Embeddings.bias.data.copy_(tensor(data["output_bias"]))
    z = tensor(data["z"]).requires_grad_()
    model.pos_items = torch.tensor(data["positives"])
    loss = model.loss_function(model.decode(z, None))
    loss.backward()
    return {
        "loss": loss.item(),
        "grad_z": z.grad.tolist(),
        "grad_output_weight": model._Item_Embeddings.weight.grad.tolist(),
        "grad_output_bias": model._Item_Embeddings.bias.grad.tolist(),
    }


class RecordedDropout(torch.nn.Module):
    """The official `nn.Dropout`, recording which entries it kept (its input has no zero entry here)."""

    def __init__(self, dropout: torch.nn.Dropout):
        super().__init__()
        self.dropout, self.keep = dropout, None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.dropout(x)
        assert bool((x != 0).all())
        self.keep = out != 0
        return out


LAYERS = {"encoder": "encode_layer_1", "decoder": "decode_layer_0", "output": "_Item_Embeddings"}


def encoder_forward(vae_models, data: dict) -> dict:
    table = tensor(data["encoder_table"])
    model = vae_models.BaseVAE(table.shape[0] - 1, [table.shape[1], len(data["z"][0])])
    model.encode_layer_0.weight.data.copy_(table)
    for name, attr in LAYERS.items():
        getattr(model, attr).weight.data.copy_(tensor(data[f"{name}_weight"]))
        getattr(model, attr).bias.data.copy_(tensor(data[f"{name}_bias"]))
    model.dropout = RecordedDropout(model.dropout)
    model.train()
    noises, randn_like = [], torch.randn_like
    torch.randn_like = lambda x: noises.append(randn_like(x)) or noises[-1]
    torch.manual_seed(23)
    try:
        mu, log_var, loss, _, _ = model(torch.tensor(data["positives"]))
    finally:
        torch.randn_like = randn_like
    kl = model.kl_loss(mu, log_var, 1.0, reduction=False)
    (loss + kl.item()).backward()  # train_model adds the KL as a constant (kl.item() / batch_size): no gradient
    gradients = {"grad_encoder_table": model.encode_layer_0.weight.grad}
    for name, attr in LAYERS.items():
        gradients[f"grad_{name}_weight"] = getattr(model, attr).weight.grad
        gradients[f"grad_{name}_bias"] = getattr(model, attr).bias.grad
    (noise,) = noises
    return {
        "dropout": model.dropout.dropout.p,
        "dropout_keep": model.dropout.keep.tolist(),
        "noise": noise.tolist(),
        "mu": mu.tolist(),
        "log_var": log_var.tolist(),
        "loss": loss.item(),
        "kl": kl.item(),
        **{name: grad.tolist() for name, grad in gradients.items()},
    }


def kmeans_passes(sampler_gpu_mm, points: torch.Tensor, initial: torch.Tensor) -> int:
    """Passes of the official kmeans's loop (lines it prints with verbose; the last pass assigns and stops)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        sampler_gpu_mm.kmeans(points, initial.clone(), verbose=True)
    return printed.getvalue().count("step:")


def midx_slow(sampler_gpu_mm, data: dict) -> dict:
    """The MIDX codebooks of a table whose first half needs more than 20 Lloyd iterations, from fixed centroids."""
    table, initial = tensor(data["midx_slow_item_table"]), tensor(data["midx_slow_initial_centroids"])
    fits = []
    for seed in (0, 1):  # the official code re-seeds empty clusters from torch's global generator: none empties here
        torch.manual_seed(seed)
        sampler = sampler_gpu_mm.MidxUniform(table, 5, torch.device("cpu"), initial.clone())
        fits.append((sampler.c0, sampler.c1, sampler.cd0, sampler.cd1))
    assert all(torch.equal(a, b) for a, b in zip(*fits, strict=True))
    c0, c1, cd0, cd1 = fits[0]
    return {
        "codewords": [c0.tolist(), c1.tolist()],
        "assignments": [(cd0[1:] - 1).tolist(), (cd1[1:] - 1).tolist()],
        "passes": [kmeans_passes(sampler_gpu_mm, half, initial) for half in torch.chunk(table, 2, dim=-1)],
    }


def midx(sampler_gpu_mm, data: dict) -> dict:
    table, query = tensor(data["midx_item_table"]), tensor(data["midx_query"])
    initial = tensor(data["midx_initial_centroids"])
    counts = np.array(data["midx_counts"], dtype=np.float64)
    every_item = torch.arange(1, table.shape[0] + 1).expand(query.shape[0], -1)
    cpu = torch.device("cpu")
    samplers = {
        "midx_uni": sampler_gpu_mm.MidxUniform(table, 5, cpu, initial.clone()),
        "midx_pop_mode0": sampler_gpu_mm.MidxUniPop(table, 5, cpu, initial.clone(), counts.copy(), mode=0),
        "midx_pop_mode1": sampler_gpu_mm.MidxUniPop(table, 5, cpu, initial.clone(), counts.copy(), mode=1),
    }
    uniform = samplers["midx_uni"]
    out = {
        "codewords": [uniform.c0.tolist(), uniform.c1.tolist()],
        "assignments": [(uniform.cd0[1:] - 1).tolist(), (uniform.cd1[1:] - 1).tolist()],
    }
    for name, sampler in samplers.items():
        out[f"{name}_unnormalised_log_q"] = sampler.compute_item_p(query, every_item).tolist()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("tests/golden/official/fastvae.json"))
    args = parser.parse_args()
    torch.set_default_dtype(torch.float64)
    vae_models, sampler_gpu_mm = import_official(args.repo.resolve())
    data = make_input()
    commit = subprocess.run(
        ["git", "-C", str(args.repo), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    if len(commit) != 40:
        raise SystemExit(f"--repo {args.repo}: not a git checkout (its commit is recorded with the figures)")
    golden = {
        "repository": "https://github.com/HERECJ/FastVae_Gpu",
        "commit": commit,
        "command": "python bench/official/fastvae.py --repo PATH",
        "function": FUNCTIONS,
        "input": data,
        "sampled_softmax": sampled_softmax(vae_models, data),
        "full_softmax": full_softmax(vae_models, data),
        "midx": midx(sampler_gpu_mm, data),
        "encoder_forward": encoder_forward(vae_models, data),
        "midx_slow": midx_slow(sampler_gpu_mm, data),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(golden, separators=(",", ":")) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
