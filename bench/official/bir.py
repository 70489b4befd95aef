"""Golden figures from the official BIR / XIR code (issue 22) -> tests/golden/official/bir.json.

    python3 bench/official/bir.py --repo XIR_CHECKOUT [--out tests/golden/official/bir.json]

XIR_CHECKOUT is a checkout of HERECJ/XIR or a bare git mirror (then its Python files at HEAD are extracted to a temporary
folder); the JSON records its commit. All float64 (torch's default dtype set to float64, the device is the CPU) on a
fixed batch of 6 (user, item) pairs over 5 users and 7 items, one item twice in the batch, fixed N(0, 1) tables (the
official nn.Embedding's scale) and training counts from a fixed list of interactions (stored in the JSON). Official
item ids are recx's + 1 (row 0 of its item table is padding). Cases, each with the loss and its gradients w.r.t.
both tables:
- `ssl_pop`: framework/trainer.py `Trainer._train_step` with `Pop_Debias` (`--debias 2`, pop_mode 1): the in-batch
  softmax over the whole batch row, the query's own positive kept, logQ = log(c_j / Σc) on both sides.
- `ssl_pop_masked`: the same `MFModel.loss` with the query's own positive item (every batch position holding it)
  removed from the row (score -inf): recx's default SSL-Pop, which the official code does not run.
- `bir`: `Trainer_Resample._train_step` with `ReSample_Debias` (`--debias 3`, sample size = batch size): the
  resampling probabilities softmax(s - log p) over the batch, the indices its `torch.multinomial` drew (seeded), loss.
- `xir`: framework/trainer_cache.py `Trainer_Cache._train_step` with `Cache` (`--debias 8`, λ = 0.2, cache size =
  batch size) from a fixed cache of items with training interactions: both resampling distributions and their draws,
  the occurrence counts after the step, the distribution the next cache is drawn from (∝ occurrence over the items
  drawn this step), and the loss.
`log_p`: `Pop_Debias.pop_prob`'s log for the 7 items. Stubs: torch.utils.tensorboard (SummaryWriter, logging only)
and torchmetrics (evaluation only), which the called functions do not use.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import types
from pathlib import Path

import numpy as np
import torch
from checkout import checkout

OUT = Path(__file__).resolve().parents[2] / "tests" / "golden" / "official" / "bir.json"
N_USERS, N_ITEMS, DIM = 5, 7, 3
TRAIN = [
    [0, 0],
    [0, 1],
    [0, 3],
    [1, 1],
    [1, 2],
    [1, 4],
    [1, 6],
    [2, 0],
    [2, 1],
    [2, 5],
    [3, 1],
    [3, 3],
    [3, 4],
    [4, 2],
    [4, 5],
    [4, 6],
    [4, 0],
    [0, 5],
    [2, 3],
    [3, 0],
]
BATCH = [3, 1, 7, 13, 10, 18]  # positions in TRAIN: users [1, 0, 2, 4, 3, 2], items [1, 1, 0, 2, 1, 3]
CACHE = [4, 1, 6, 1, 0, 5]
CACHE_WEIGHT = 0.2
SEED = 0


class StubModule(types.ModuleType):
    """Any attribute is a placeholder (the called functions use none)."""

    def __getattr__(self, name):
        return object


def stub_modules() -> None:
    tensorboard = StubModule("torch.utils.tensorboard")
    metrics = StubModule("torchmetrics")
    metrics.functional = StubModule("torchmetrics.functional")
    sys.modules.update(
        {"torch.utils.tensorboard": tensorboard, "torchmetrics": metrics, "torchmetrics.functional": metrics.functional}
    )


class RecordedMultinomial:
    """torch.multinomial, recording each call's (probabilities, draws)."""

    def __init__(self):
        self.calls, self.original = [], torch.multinomial

    def __call__(self, weights, n, replacement=False, **kwargs):
        drawn = self.original(weights, n, replacement=replacement, **kwargs)
        self.calls.append((weights.detach().clone(), drawn.clone()))
        return drawn

    def __enter__(self):
        torch.multinomial = self
        return self

    def __exit__(self, *exc):
        torch.multinomial = self.original


def fixed_tables() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(SEED)
    return (
        torch.randn(N_USERS, DIM, generator=generator, dtype=torch.float64),
        torch.randn(N_ITEMS, DIM, generator=generator, dtype=torch.float64),
    )


def official_model(framework_model, users_table, items_table):
    model = framework_model.MFModel(N_USERS, N_ITEMS, DIM)
    with torch.no_grad():
        model.user_encoder.weight.copy_(users_table)
        model.item_encoder.weight.zero_()
        model.item_encoder.weight[1:] = items_table
    return model


def gradients(model, loss) -> dict:
    loss.backward()
    return {
        "loss": float(loss.detach()),
        "grad_users": model.user_encoder.weight.grad.tolist(),
        "grad_items": model.item_encoder.weight.grad[1:].tolist(),
    }


def trainer(cls, **config):
    instance = cls.__new__(cls)
    instance.config = {"sample_from_batch": False, "sample_size": 10, "batch_size": len(BATCH), **config}
    instance.device = torch.device("cpu")
    instance.item_num = N_ITEMS + 1
    return instance


def cases(root: Path) -> dict:
    sys.path.insert(0, str(root))
    stub_modules()
    from framework import debias, trainer_cache
    from framework import model as framework_model
    from framework import trainer as framework_trainer

    cpu = torch.device("cpu")
    pop_count = np.bincount([item for _, item in TRAIN], minlength=N_ITEMS).astype(np.float64)
    users_table, items_table = fixed_tables()
    users = torch.tensor([TRAIN[k][0] for k in BATCH])
    items = torch.tensor([TRAIN[k][1] for k in BATCH]) + 1
    out = {"log_p": torch.log(debias.Pop_Debias(pop_count, cpu).pop_prob[1:]).tolist()}

    model = official_model(framework_model, users_table, items_table)
    out["ssl_pop"] = gradients(
        model, trainer(framework_trainer.Trainer)._train_step(users, items, model, debias.Pop_Debias(pop_count, cpu))
    )

    model = official_model(framework_model, users_table, items_table)
    pop = debias.Pop_Debias(pop_count, cpu)
    scores = model.construct_query(users) @ model.item_encoder(items).T
    log_q = pop(items)
    masked = scores.masked_fill(items[None, :] == items[:, None], float("-inf"))
    out["ssl_pop_masked"] = gradients(
        model, model.loss(torch.diag(scores), log_q, masked, log_q.view(1, -1).repeat(len(BATCH), 1))
    )

    torch.manual_seed(SEED)
    model = official_model(framework_model, users_table, items_table)
    with RecordedMultinomial() as recorded:
        loss = trainer(framework_trainer.Trainer_Resample)._train_step(
            users, items, model, debias.ReSample_Debias(pop_count, cpu)
        )
    ((probabilities, indices),) = recorded.calls
    out["bir"] = {"probabilities": probabilities.tolist(), "indices": indices.tolist(), **gradients(model, loss)}

    torch.manual_seed(SEED)
    model = official_model(framework_model, users_table, items_table)
    cache = trainer_cache.Cache(pop_count, cpu, len(BATCH))
    cache.sample_pool = torch.tensor(CACHE) + 1
    with RecordedMultinomial() as recorded:
        loss = trainer(trainer_cache.Trainer_Cache, **{"lambda": CACHE_WEIGHT})._train_step(users, items, model, cache)
    (cache_p, cache_draws), (batch_p, batch_draws), (pool_weights, _) = recorded.calls
    drawn = torch.unique(torch.cat([(torch.tensor(CACHE) + 1)[cache_draws], items[batch_draws]], dim=-1))
    next_cache = torch.zeros(N_ITEMS + 1).index_put_((drawn,), pool_weights / pool_weights.sum())
    out["xir"] = {
        "cache": CACHE,
        "cache_weight": CACHE_WEIGHT,
        "batch_probabilities": batch_p.tolist(),
        "cache_probabilities": cache_p.tolist(),
        "batch_indices": batch_draws.tolist(),
        "cache_indices": cache_draws.tolist(),
        "occurrence": cache.occurence[1:].tolist(),
        "next_cache_probabilities": next_cache[1:].tolist(),
        **gradients(model, loss),
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="checkout or bare mirror of HERECJ/XIR")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_default_dtype(torch.float64)
    with tempfile.TemporaryDirectory() as scratch:
        root, commit = checkout(args.repo, Path(scratch), "framework")
        figures = cases(root)
    users_table, items_table = fixed_tables()
    inputs = {
        "n_users": N_USERS,
        "n_items": N_ITEMS,
        "train": TRAIN,
        "batch": BATCH,
        "user_table": users_table.tolist(),
        "item_table": items_table.tolist(),
    }
    document = {
        "repository": "HERECJ/XIR",
        "commit": commit,
        "command": shlex.join(["python3", "bench/official/bir.py", *sys.argv[1:]]),
        "function": "framework/trainer.py:Trainer._train_step (debias 2), Trainer_Resample._train_step "
        "(debias 3); framework/trainer_cache.py:Trainer_Cache._train_step, Cache.update_pool "
        "(debias 8); framework/debias.py:Pop_Debias, ReSample_Debias",
        "inputs": inputs,
        **figures,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
