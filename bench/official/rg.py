"""Golden figures for RG² and RG× from the authors' code (yuanhao53/RG2): one ALS iteration on a tiny fixed input.

    python3 bench/official/rg.py --repo PATH [--out tests/golden/official/rg.json]

PATH is a checkout of https://github.com/yuanhao53/RG2 (never vendored). The script imports its `rg2.py` and
`rgx.py` and runs, for each model, the official `_init_model` (N, M, |I_u|/2N), `_init_parameter` (λ I and the
buffers), `training_epoch` (QᵀQ before the user half-step, Pᵀ diag(|I_u|/2N) P before the item half-step) and
`training_step` on one batch holding every user (user half-step), then every item (item half-step).

What is stubbed or forced (nothing that those functions compute):
- `recstudio` (the library the official code runs in) is not imported: `recstudio.model.basemodel.BaseRetriever`
  is a small torch.nn.Module whose `_init_model`, `_init_parameter`, `training_epoch` do nothing and whose
  `_get_item_feat` / `_get_query_feat` return the batch's item / user id field, as RecStudio's do with id-only
  features; `scorer` and `ALSDataset` are empty placeholders (only referenced in methods not called here);
- the encoders are torch.nn.Embedding tables with padding row 0 set to zero (RecStudio ids start at 1; its
  initialisers zero the padding row, and no half-step writes it);
- CPU and float64 throughout (torch's default dtype is set to float64, so λ I is float64 too);
- batches are built as RecStudio's ALSDataset lays them out: the user loader gives user ids [B] with the items
  padded by 0 [B, L]; the transposed loader gives item ids [B] with the users padded by 0 [B, L].

The input (7 users × 5 items, d 3, α, β, λ, the interaction pairs and the float64 initial factors) is stored in the
JSON with the figures: the factors after the user half-step and after the following item half-step.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import types
from pathlib import Path

import torch

OUT = Path(__file__).resolve().parents[2] / "tests" / "golden" / "official" / "rg.json"
N_USERS, N_ITEMS, DIM = 7, 5, 3
ALPHA, BETA, LAMBDA = 0.3, 0.2, 0.5
# (user, item), 0-based; every user and every item has an interaction
PAIRS = [(0, 0), (0, 2), (1, 1), (2, 0), (2, 3), (2, 4), (3, 2), (4, 1), (4, 3), (5, 4), (6, 0), (6, 1), (6, 2), (6, 3)]


def stub_recstudio() -> None:
    """Install the smallest `recstudio` the official modules import (see the module docstring)."""

    class BaseRetriever(torch.nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config

        def _init_model(self, train_data):
            pass

        def _init_parameter(self):
            pass

        def training_epoch(self, nepoch):
            pass

        def _get_item_feat(self, batch):
            return batch[self.fiid]

        def _get_query_feat(self, batch):
            return batch[self.fuid]

    package = types.ModuleType("recstudio")
    model = types.ModuleType("recstudio.model")
    model.basemodel = types.SimpleNamespace(BaseRetriever=BaseRetriever)
    model.scorer = types.SimpleNamespace(InnerProductScorer=object)
    data = types.ModuleType("recstudio.data")
    advance = types.ModuleType("recstudio.data.advance_dataset")
    advance.ALSDataset = object
    sys.modules.update(
        {
            "recstudio": package,
            "recstudio.model": model,
            "recstudio.data": data,
            "recstudio.data.advance_dataset": advance,
        }
    )


def initial_factors() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(22)
    users = torch.rand(N_USERS, DIM, generator=generator, dtype=torch.float64)
    items = torch.rand(N_ITEMS, DIM, generator=generator, dtype=torch.float64)
    return users, items


def padded(lists: list[list[int]]) -> torch.Tensor:
    """1-based ids padded with 0, one row per list."""
    width = max(len(ids) for ids in lists)
    return torch.tensor([[i + 1 for i in ids] + [0] * (width - len(ids)) for ids in lists])


def embedding(rows: torch.Tensor) -> torch.nn.Embedding:
    table = torch.nn.Embedding(rows.shape[0] + 1, rows.shape[1], padding_idx=0)
    table.weight.requires_grad_(False)
    table.weight.zero_()
    table.weight[1:] = rows
    return table


def one_iteration(model_class, users: torch.Tensor, items: torch.Tensor) -> dict:
    config = {"train": {"alpha": ALPHA, "beta": BETA, "lambda": LAMBDA}, "model": {"item_bias": False}}
    model = model_class(config)
    model.embed_dim, model.fuid, model.fiid, model.frating = DIM, "user", "item", "rating"
    user_count = torch.zeros(N_USERS + 1, dtype=torch.int64)
    for user, _ in PAIRS:
        user_count[user + 1] += 1
    model._init_model(types.SimpleNamespace(user_count=user_count, num_items=N_ITEMS + 1, num_users=N_USERS + 1))
    model.query_encoder, model.item_encoder = embedding(users), embedding(items)
    model._init_parameter()
    by_user = [[i for u, i in PAIRS if u == user] for user in range(N_USERS)]
    by_item = [[u for u, i in PAIRS if i == item] for item in range(N_ITEMS)]
    user_items = padded(by_user)
    model.training_epoch(0)
    model.training_step({"user": torch.arange(1, N_USERS + 1), "item": user_items, "rating": (user_items > 0).double()})
    after_users = model.query_encoder.weight[1:].clone()
    item_users = padded(by_item)
    model.training_epoch(1)
    model.training_step({"user": item_users, "item": torch.arange(1, N_ITEMS + 1), "rating": (item_users > 0).double()})
    return {
        "users_after_user_step": after_users.tolist(),
        "items_after_item_step": model.item_encoder.weight[1:].tolist(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, type=Path, help="checkout of github.com/yuanhao53/RG2")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_default_dtype(torch.float64)
    stub_recstudio()
    sys.path.insert(0, str(args.repo.resolve()))
    from rg2 import RG2
    from rgx import RGX

    commit = subprocess.run(
        ["git", "-C", str(args.repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    users, items = initial_factors()
    golden = {
        "repository": "https://github.com/yuanhao53/RG2",
        "commit": commit,
        "command": "python3 bench/official/rg.py --repo PATH"
        + ("" if args.out == OUT else f" --out {shlex.quote(str(args.out))}"),
        "function": "rg2.py:RG2.training_step, rgx.py:RGX.training_step (with their _init_model, _init_parameter, "
        "training_epoch)",
        "input": {
            "n_users": N_USERS,
            "n_items": N_ITEMS,
            "dim": DIM,
            "alpha": ALPHA,
            "beta": BETA,
            "lambda": LAMBDA,
            "pairs": PAIRS,
            "user_factors": users.tolist(),
            "item_factors": items.tolist(),
        },
        "rg2": one_iteration(RG2, users, items),
        "rgx": one_iteration(RGX, users, items),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(golden, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
