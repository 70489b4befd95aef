"""Golden training loops from the official PRISM code (issue 43) -> tests/golden/official/prism_loop.json.

    python3 bench/official/prism_loop.py --repo PRISM_CHECKOUT [--out tests/golden/official/prism_loop.json]

PRISM_CHECKOUT is a checkout of snap-research/PRISM or a bare mirror (its Python files at HEAD are then extracted to
a temporary folder). For each of BPR (`--neg_ratio 2`), SSM (`--neg_ratio 3`), DirectAU (`--loss align --reg_types
uniformity`, PRISM's degree init) and MAWU the script runs the unmodified train.py `main()` (sys.argv set to the
arguments stored in the JSON, the flags of run_train_prism.sh with `--model MLP --num_layers 0`: MF) on a tiny split:
main() builds the loader (`Data.get_dataloaders`), the `RecModel`, the `Trainer` (its Adam over every parameter of
the model, MAWU's margins included, with coupled weight decay 0.01) and `Trainer.train_model` trains 3 epochs of
5 steps (30 training edges, batch 7: the last batch of each epoch holds 2), validating after each; main() then saves
the model as `train_model` checkpointed it before the first epoch and after each, and a .params file with each
epoch's loss (`train_loss`); both are read back. CPU, float64 (torch's default dtype, so the model is float64).

Nothing official is replaced on the training path; what is random is recorded as it happens: each `torch.randint`
call of the loop (its negatives: indices into the batch's item nodes) and, per step, the batch's edges and node ids
as the loader gave them and the loss `forward_and_get_loss` returned.

Stand-ins, because torch_geometric cannot be installed here (its heterogeneous sampler needs the compiled pyg-lib or
torch-sparse) and no file of the real split is read:
- torch_geometric.loader.LinkNeighborLoader, for what train.py reads with `num_neighbors=[]` (MLP: no hop) and
  `shuffle=False`, as torch_geometric 2.4.0 (environment.yml's pin) builds it: consecutive batches of the training
  edges in their stored order; each batch's user and item node ids (`n_id`) are its distinct users and items in
  ascending order (`edge_sample`: `src.unique(return_inverse=True)`, the seeds come first in the sampler's output and
  no hop adds any), and its `edge_label_index` the edges' positions among them.
- torch.load of the split files (`train_123.pt`, ...) returns the tiny split (edges, node counts, an empty x_dict);
  the checkpoints main() saves are read with the real torch.load.
- torch_geometric.seed_everything (seeds random, numpy and torch, as PyG's) and torch_geometric.utils.sort_edge_index
  (the validation's: edges sorted by user, then item); the other torch_geometric names, matplotlib and scikit-learn
  (imported, unused on this path) are stubs, as in bench/official/prism.py.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import random
import shlex
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from checkout import checkout
from prism import _StubFinder

OUT = Path(__file__).resolve().parents[2] / "tests" / "golden" / "official" / "prism_loop.json"
N_USERS, N_ITEMS, DIM, SEED = 6, 24, 4, 123  # >= 20 items: the validation takes a top-20
N_TRAIN, N_VAL = 30, 8
COMMON = (
    "--model MLP --num_layers 0 --dataset MovieLens1M --epochs 3 --lr 0.05 --weight_decay 0.01 --batch_size 7 "
    f"--hidden_dim {DIM} --seed {SEED} --patience 10 --overwrite True --degree_init_str 1.0"
)
CASES = {
    "bpr": "--loss BPR --neg_ratio 2 --reg_types -1 --gamma_vals -1 --degree_init False",
    "ssm": "--loss SSM --neg_ratio 3 --reg_types -1 --gamma_vals -1 --degree_init False",
    "directau": "--loss align --neg_ratio 0 --reg_types uniformity --gamma_vals 1.0 --degree_init True",
    "mawu": "--loss MAWU --neg_ratio 0 --reg_types -1 --gamma_vals 2.6,1.4 --degree_init False",
}
USER, ACTION, ITEM = "user", "rates", "movie"  # utils.ALL_DATASET_ATTRS["MovieLens1M"]


def split() -> tuple[list[list[int]], list[list[int]]]:
    """(train edges, validation edges) as [[users], [items]]: distinct pairs, the training edges in a random order
    (as RandomLinkSplit leaves them), every user with a validation edge."""
    generator = torch.Generator().manual_seed(43)
    pairs = torch.randperm(N_USERS * N_ITEMS, generator=generator)[: N_TRAIN + N_VAL]
    users, items = (pairs // N_ITEMS).tolist(), (pairs % N_ITEMS).tolist()
    val = sorted(zip(users[N_TRAIN:], items[N_TRAIN:], strict=True))
    return [users[:N_TRAIN], items[:N_TRAIN]], [[u for u, _ in val], [i for _, i in val]]


class Store(dict):
    """A node or edge store: attributes and keys alike."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Split:
    """What train.py and dataloader.py read of a HeteroData split: `[user].num_nodes`, `[(user, rates, movie)]
    ["link_index"]`, `x_dict`, `.to(device)`."""

    def __init__(self, edges: list[list[int]]):
        self.stores = {
            USER: Store(num_nodes=N_USERS),
            ITEM: Store(num_nodes=N_ITEMS),
            (USER, ACTION, ITEM): Store(link_index=torch.tensor(edges)),
        }
        self.x_dict: dict = {}

    def __getitem__(self, key):
        return self.stores[key]

    def to(self, device):
        return self


class Batch:
    """A LinkNeighborLoader batch with no hop: node ids, the batch's edges in local ids, an empty x_dict."""

    def __init__(self, edges: torch.Tensor):
        users, local_users = edges[0].unique(return_inverse=True)
        items, local_items = edges[1].unique(return_inverse=True)
        self.stores = {
            USER: Store(n_id=users),
            ITEM: Store(n_id=items),
            (USER, ACTION, ITEM): Store(edge_label_index=torch.stack([local_users, local_items])),
        }
        self.x_dict: dict = {}

    def __getitem__(self, key):
        return self.stores[key]

    def to(self, device):
        return self


class LinkNeighborLoader:
    """torch_geometric 2.4.0's LinkNeighborLoader as train.py uses it (see the module docstring)."""

    def __init__(self, data, num_neighbors, edge_label_index, batch_size, shuffle):
        assert num_neighbors == [] and not shuffle, (num_neighbors, shuffle)
        self.edges, self.batch_size = edge_label_index[1], batch_size

    def __iter__(self):
        for start in range(0, self.edges.shape[1], self.batch_size):
            yield Batch(self.edges[:, start : start + self.batch_size])

    def __len__(self):
        return -(-self.edges.shape[1] // self.batch_size)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def sort_edge_index(edge_index: torch.Tensor) -> torch.Tensor:
    order = (edge_index[0] * (int(edge_index[1].max()) + 1) + edge_index[1]).argsort(stable=True)
    return edge_index[:, order]


def install_stubs() -> None:
    stubbed = ["torch_geometric", "matplotlib"]
    if importlib.util.find_spec("sklearn") is None:
        stubbed.append("sklearn")
    sys.meta_path.insert(0, _StubFinder(stubbed))
    import torch_geometric
    import torch_geometric.loader
    import torch_geometric.utils

    torch_geometric.seed_everything = seed_everything
    torch_geometric.loader.LinkNeighborLoader = LinkNeighborLoader
    torch_geometric.utils.sort_edge_index = sort_edge_index


class Recorder:
    """The loop's randint draws and, per step, the batch and the loss `forward_and_get_loss` returned."""

    def __init__(self, train_module):
        self.train, self.steps, self.draws = train_module, [], []

    @contextlib.contextmanager
    def recording(self):
        trainer, real_randint = self.train.Trainer, torch.randint
        forward = trainer.forward_and_get_loss

        def randint(*args, **kwargs):
            drawn = real_randint(*args, **kwargs)
            self.draws.append(drawn.clone())
            return drawn

        def recorded_forward(me, data, edge_label_index, train=True, **kwargs):
            assert train
            loss = forward(me, data, edge_label_index, train=train, **kwargs)
            user_ids, item_ids = data[USER].n_id, data[ITEM].n_id
            positives = data[(USER, ACTION, ITEM)].edge_label_index
            (draws,) = self.draws[len(self.steps) :]  # this step's one draw (empty without negatives)
            self.steps.append(
                {
                    "users": user_ids[positives[0]].tolist(),
                    "items": item_ids[positives[1]].tolist(),
                    "user_n_id": user_ids.tolist(),
                    "item_n_id": item_ids.tolist(),
                    "negative_draws": draws.tolist(),
                    "loss": float(loss.detach()),
                }
            )
            return loss

        torch.randint, trainer.forward_and_get_loss = randint, recorded_forward
        try:
            yield self
        finally:
            torch.randint, trainer.forward_and_get_loss = real_randint, forward


def tables(state: dict) -> dict:
    out = {
        "user_table": state["user_embedding.weight"].tolist(),
        "item_table": state["item_embedding.weight"].tolist(),
    }
    if "user_margin.weight" in state:
        out["user_margin"] = state["user_margin.weight"].squeeze(-1).tolist()
        out["item_margin"] = state["item_margin.weight"].squeeze(-1).tolist()
    return out


def run_case(train_module, arguments: str, scratch: Path) -> dict:
    """train.py main() with these arguments; the checkpoints and .params it saves, and what was recorded."""
    save = scratch / "model_chkps"
    argv = shlex.split(arguments) + ["--model_save_path", str(save), "--dataset_save_path", str(scratch / "datasets")]
    train_edges, val_edges = split()
    splits = {"train": Split(train_edges), "val": Split(val_edges), "test": Split(val_edges)}
    real_load = torch.load

    def load(path, *args, **kwargs):
        name = Path(str(path)).name
        if name == f"train_{SEED}.pt" or name == f"val_{SEED}.pt" or name == f"test_{SEED}.pt":
            return splits[name.split("_")[0]]
        return real_load(path, *args, **kwargs)

    recorder = Recorder(train_module)
    saved_argv, sys.argv, torch.load = sys.argv, ["train.py", *argv], load
    try:
        with recorder.recording(), contextlib.redirect_stdout(io.StringIO()):
            train_module.main()
    finally:
        sys.argv, torch.load = saved_argv, real_load
    (params_file,) = save.rglob("*.params")
    params = json.loads(params_file.read_text())
    stem = params_file.name[: -len(".params")]
    states = [
        real_load(params_file.with_name(f"{stem}_epochs_{e}.pt"), weights_only=True)
        for e in range(-1, params["epochs"])
    ]
    return {
        "arguments": arguments,
        "neg_ratio": params["neg_ratio"],
        "gammas": params["gammas"],
        "initial": tables(states[0]),
        "epochs": [
            {"loss": loss, **tables(state)} for loss, state in zip(params["train_loss"], states[1:], strict=True)
        ],
        "steps": recorder.steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="checkout or bare mirror of snap-research/PRISM")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_default_dtype(torch.float64)
    install_stubs()
    cases = {}
    with tempfile.TemporaryDirectory() as scratch:
        root, commit = checkout(args.repo, Path(scratch), "train.py")
        sys.path.insert(0, str(root))
        import train as train_module

        for name, arguments in CASES.items():
            with tempfile.TemporaryDirectory() as run_folder:
                cases[name] = run_case(train_module, f"{COMMON} {arguments}", Path(run_folder))
    train_edges, val_edges = split()
    document = {
        "repository": "snap-research/PRISM",
        "commit": commit,
        "command": shlex.join(["python3", "bench/official/prism_loop.py", *sys.argv[1:]]),
        "function": "train.py:main (Trainer.__init__'s Adam, Trainer.train_model, Trainer.forward_and_get_loss), "
        "losses.py, models.py:RecModel, dataloader.py:Data.get_dataloaders; train.py's arguments per case",
        "inputs": {"n_users": N_USERS, "n_items": N_ITEMS, "train": train_edges, "val": val_edges},
        "cases": cases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
