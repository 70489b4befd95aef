"""Golden figures from the official hard-negative-sampling code (issue 22) -> tests/golden/official/hns.json.

    python3 bench/official/hns.py --repo WWW_2023_CODE_CHECKOUT [--out tests/golden/official/hns.json]

The checkout is swt-user/WWW_2023_code or a bare git mirror of it (then its Python files at HEAD are extracted to a
temporary folder); the JSON records its commit. One training step as main_more.py's `train_model` runs it, for the
README's DNS(M, N) (`--sampler 0 --weighted --loss_type 1 --lambda_w M`) and Softmax-v(ρ, N) (`--sampler 0
--weighted --loss_type 2 --lambda_w ρ`), `reduction=False`: sampler.py `base_sampler.forward` (its torch.randint
replaced by fixed candidates, N = 6 per query, one repeated in a row), model.py `BaseMF.forward` and
`BaseModel.loss_function`. All float64 (torch's default dtype set to float64, the device is the CPU) on a fixed batch
of 5 (user, item) pairs over 4 users and 9 items with fixed N(0, 0.5²) tables (stored in the JSON). Per case: the
loss, its gradients w.r.t. both tables, and DNS's kept candidates (the official top-M by score, as positions in
each query's candidate row) or Softmax-v's importance weights (the softmax `loss_function` computes). And the
candidates' law (`candidate_law`): the unmodified `base_sampler.forward` (N = 6) on the same batch under
torch.manual_seed(s) for s = 0 .. 1999, stored as counts (how often each item was drawn for each query of the batch,
and how many rows of N draws held 1 .. N distinct items), not as the 60,000 draws. Stub: numpy.lib.function_base
(removed in NumPy 2), whose `select` model.py imports and never uses.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import types
from pathlib import Path

import torch
import torch.nn.functional as F
from checkout import checkout

OUT = Path(__file__).resolve().parents[2] / "tests" / "golden" / "official" / "hns.json"
N_USERS, N_ITEMS, DIM, SCALE = 4, 9, 3, 0.5
USERS = [0, 1, 2, 3, 1]
ITEMS = [2, 0, 5, 7, 3]
CANDIDATES = [[1, 4, 6, 8, 3, 0], [2, 5, 5, 7, 8, 1], [0, 1, 3, 4, 6, 8], [8, 6, 2, 0, 5, 1], [4, 7, 1, 6, 2, 2]]
DNS_M = [1, 2, 6]
LAW_SEEDS = 2000
SOFTMAX_V_RHO = [0.1, 1.0, 5.0]


def fixed_tables() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return (
        SCALE * torch.randn(N_USERS, DIM, generator=generator, dtype=torch.float64),
        SCALE * torch.randn(N_ITEMS, DIM, generator=generator, dtype=torch.float64),
    )


class RecordedSoftmax:
    """torch.nn.functional.softmax, recording each result (the importance weights of `loss_function`)."""

    def __init__(self):
        self.results, self.original = [], F.softmax

    def __call__(self, *args, **kwargs):
        result = self.original(*args, **kwargs)
        self.results.append(result.detach().clone())
        return result

    def __enter__(self):
        F.softmax = self
        return self

    def __exit__(self, *exc):
        F.softmax = self.original


def one_step(official_model, official_sampler, loss_type: int, lambda_w: float) -> dict:
    model = official_model.BaseMF(N_USERS, N_ITEMS, DIM)
    users_table, items_table = fixed_tables()
    with torch.no_grad():
        model._User_Embedding.weight.copy_(users_table)
        model._Item_Embedding.weight.copy_(items_table)
    sampler = official_sampler.base_sampler(N_USERS, N_ITEMS, 0, 0, len(CANDIDATES[0]), torch.device("cpu"))
    user_id, item_id = torch.tensor(USERS), torch.tensor(ITEMS)
    original_randint = official_sampler.torch.randint
    official_sampler.torch.randint = lambda *args, **kwargs: torch.tensor(CANDIDATES)
    try:
        neg_id, prob_neg = sampler(user_id, model=model)
    finally:
        official_sampler.torch.randint = original_randint
    pos_rat, neg_rat = model(user_id, item_id, neg_id)
    with RecordedSoftmax() as softmax:
        loss = model.loss_function(
            neg_rat,
            prob_neg,
            pos_rat,
            user_id=user_id,
            reduction=False,
            weighted=True,
            lambda_w=lambda_w,
            loss_type=loss_type,
        )
    loss.backward()
    figures = {
        "loss": float(loss.detach()),
        "grad_users": model._User_Embedding.weight.grad.tolist(),
        "grad_items": model._Item_Embedding.weight.grad.tolist(),
    }
    if loss_type == 1:
        figures["kept_positions"] = torch.topk(neg_rat.detach(), int(lambda_w), dim=-1).indices.sort(-1).values.tolist()
    else:
        (weights,) = softmax.results
        figures["weights"] = weights.tolist()
    return figures


def candidate_law(official_sampler) -> dict:
    """Counts of the official uniform candidates over LAW_SEEDS seeded calls on the batch: per query and item, and
    per number of distinct items in a query's row."""
    n = len(CANDIDATES[0])
    sampler = official_sampler.base_sampler(N_USERS, N_ITEMS, 0, 0, n, torch.device("cpu"))
    counts = torch.zeros(len(USERS), N_ITEMS, dtype=torch.int64)
    distinct = torch.zeros(n + 1, dtype=torch.int64)
    for seed in range(LAW_SEEDS):
        torch.manual_seed(seed)
        neg_id, _ = sampler(torch.tensor(USERS))
        counts.scatter_add_(1, neg_id, torch.ones_like(neg_id))
        for row in neg_id:
            distinct[row.unique().numel()] += 1
    return {"seeds": LAW_SEEDS, "n_candidates": n, "counts": counts.tolist(), "distinct_per_row": distinct.tolist()}


def cases(root: Path) -> dict:
    sys.path.insert(0, str(root))
    function_base = types.ModuleType("numpy.lib.function_base")  # gone in NumPy 2; model.py imports an unused name
    function_base.select = None
    sys.modules.setdefault("numpy.lib.function_base", function_base)
    import model as official_model
    import sampler as official_sampler

    return {
        "dns": {str(m): one_step(official_model, official_sampler, 1, m) for m in DNS_M},
        "softmax_v": {str(rho): one_step(official_model, official_sampler, 2, rho) for rho in SOFTMAX_V_RHO},
        "candidate_law": candidate_law(official_sampler),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="checkout or bare mirror of swt-user/WWW_2023_code")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_default_dtype(torch.float64)
    with tempfile.TemporaryDirectory() as scratch:
        root, commit = checkout(args.repo, Path(scratch), "model.py")
        figures = cases(root)
    users_table, items_table = fixed_tables()
    inputs = {
        "n_users": N_USERS,
        "n_items": N_ITEMS,
        "users": USERS,
        "items": ITEMS,
        "candidates": CANDIDATES,
        "user_table": users_table.tolist(),
        "item_table": items_table.tolist(),
    }
    document = {
        "repository": "swt-user/WWW_2023_code",
        "commit": commit,
        "command": shlex.join(["python3", "bench/official/hns.py", *sys.argv[1:]]),
        "function": "sampler.py:base_sampler.forward; model.py:BaseMF.forward, BaseModel.loss_function "
        "(loss_type 1: DNS(M, N), loss_type 2: Softmax-v(rho, N); weighted, reduction=False); "
        "candidate_law: sampler.py:base_sampler.forward unmodified",
        "inputs": inputs,
        **figures,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
