"""Golden figures from the official PRISM, DirectAU and MAWU code (issue 22) -> tests/golden/official/prism.json.

    python3 bench/official/prism.py --repo PRISM_CHECKOUT [--directau DIRECTAU_CHECKOUT] [--mawu MAWU_CHECKOUT]

Each PATH is a checkout or a bare git mirror (then its *.py files at HEAD are extracted to a temporary folder); the
JSON records each repository's commit. Cases, all float64 on a fixed batch of 10 (user, item) pairs over 5 users and
7 items with repeated users and items, fixed tables and margins in [0, 1] (stored in the JSON):
- `prism_align`, `prism_mawu`: snap-research/PRISM train.py `Trainer.forward_and_get_loss` (loss `align` with reg
  `uniformity`, and `MAWU`; the code that produced the PRISM paper's Table 1), on a `models.RecModel` "MLP" of depth 0
  (= MF); the loss and its gradients w.r.t. both tables and both margin tables.
- `directau`: THUwangcy/DirectAU `DirectAU.calculate_loss`; `mawu_directau`, `mawu`: psm1206/MAWU
  `DirectAU.calculate_loss` and `MAWU.calculate_loss`, MF encoders, called with a stand-in `self` holding the
  encoder, margins and gammas.
- `prism_mawu_outside`, `mawu_outside`: the same MAWU calls from margins in [-0.8, 1.8] (`*_margin_outside`), called
  twice on the batch: both codes compute the loss with the margins as they are, then clip them onto [0, 1] in place
  (PRISM `RecModel.clip_margins`, MAWU at the end of `calculate_loss`); recorded are the first call's loss and
  gradients (`first_*`), the clipped margins it leaves (`projected_*_margin`) and the second call's loss and
  gradients.
- `prism_init`: PRISM dataloader.py `Data.get_dataloaders` magnitudes α log(d + 2) + (1 - α) for a fixed edge list,
  and the row norms of `models.RecModel`'s tables initialised with them (the directions are random; the norms not).
Stubs (modules the called functions do not use): torch_geometric and every submodule (imported by models.py,
dataloader.py, utils.py and train.py for graph layers, loaders and seeding), matplotlib (dataloader.py plots),
scikit-learn when it is not installed (train.py imports evaluation_metrics.py, which imports sklearn.metrics for its
NDCG), and for the RecBole-based repositories recbole.model.abstract_recommender, recbole.model.init and
recbole.utils (the base class, initialiser and enum the loss methods do not touch). Needed: torch, numpy, networkx
and tqdm (imported by utils.py and models.py). `torch.load` is replaced while `get_dataloaders`
runs by a function returning a stand-in train split holding the edge list, and its LinkNeighborLoader is a stub.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import importlib.util
import json
import shlex
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import torch

OUT = Path(__file__).resolve().parents[2] / "tests" / "golden" / "official" / "prism.json"
N_USERS, N_ITEMS, DIM = 5, 7, 4
USERS = [0, 2, 1, 0, 3, 2, 0, 4, 1, 0]
ITEMS = [1, 3, 1, 6, 0, 3, 2, 1, 5, 1]
GAMMA_DIRECTAU, GAMMA_USER, GAMMA_ITEM = 1.7, 2.6, 1.4
INIT_EDGES = [[0, 0, 0, 1, 1, 2, 3, 3, 3, 3, 3], [0, 1, 4, 1, 2, 1, 0, 1, 2, 4, 5]]
INIT_USERS, INIT_ITEMS, INIT_DIM, ALPHAS = 5, 7, 16, (1.0, 0.4, 0.0)
OUTSIDE = "_outside"  # the suffix of the margin inputs outside [0, 1] and of the cases on them


class _StubMeta(type):
    def __getattr__(cls, name):
        return _Stub


class _Stub(metaclass=_StubMeta):
    """Any attribute, any call, any base class."""

    def __init__(self, *args, **kwargs):
        pass


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, prefixes):
        self.prefixes = prefixes

    def find_spec(self, name, path=None, target=None):
        if any(name == p or name.startswith(p + ".") for p in self.prefixes):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def _source(path: str, keep: list) -> tuple[Path, str]:
    """A folder with the repository's files and its commit; a bare mirror's *.py files are extracted."""
    bare = subprocess.run(["git", "-C", path, "rev-parse", "--is-bare-repository"], capture_output=True, text=True)
    if bare.returncode != 0:
        return Path(path), "unknown"
    commit = subprocess.run(
        ["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if bare.stdout.strip() != "true":
        return Path(path), commit
    folder = tempfile.TemporaryDirectory()
    keep.append(folder)
    archive = subprocess.run(["git", "-C", path, "archive", "HEAD", "--", "*.py"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", folder.name], input=archive.stdout, check=True)
    return Path(folder.name), commit


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _inputs() -> dict:
    g = torch.Generator().manual_seed(22)
    return {
        "user_table": torch.randn(N_USERS, DIM, generator=g, dtype=torch.float64),
        "item_table": torch.randn(N_ITEMS, DIM, generator=g, dtype=torch.float64),
        "user_margin": torch.rand(N_USERS, generator=g, dtype=torch.float64),
        "item_margin": torch.rand(N_ITEMS, generator=g, dtype=torch.float64),
    }


def _outside_margins() -> dict:
    """Margins in [-0.8, 1.8]: some below 0, some above 1 (as an optimizer step can leave them), some inside."""
    g = torch.Generator().manual_seed(38)
    return {
        f"user_margin{OUTSIDE}": torch.rand(N_USERS, generator=g, dtype=torch.float64) * 2.6 - 0.8,
        f"item_margin{OUTSIDE}": torch.rand(N_ITEMS, generator=g, dtype=torch.float64) * 2.6 - 0.8,
    }


def _figures(loss, tables: dict, prefix: str = "") -> dict:
    """The loss and the gradients of the tables (zeroed after, for a next call), keys prefixed by `prefix`."""
    loss.backward()
    out = {f"{prefix}loss": loss.item()}
    for name, param in tables.items():
        grad = param.grad if param.grad is not None else torch.zeros_like(param)
        out[f"{prefix}grad_{name}"] = grad.reshape(param.shape[0], -1).squeeze(-1).tolist()
        param.grad = None
    return out


def _prism_cases(root: Path, inputs: dict) -> dict:
    sys.path.insert(0, str(root))
    utils = _load("utils", root / "utils.py")
    _load("losses", root / "losses.py")
    models = _load("models", root / "models.py")
    dataloader = _load("dataloader", root / "dataloader.py")
    train = _load("train", root / "train.py")
    dataset = dataloader.Data.__new__(dataloader.Data)
    for key in ("user", "action", "item", "inverse_action"):
        setattr(dataset, key, utils.ALL_DATASET_ATTRS["MovieLens1M"][key])
    cases = {
        "prism_align": _prism_case(train, models, dataset, inputs, "align"),
        "prism_mawu": _prism_case(train, models, dataset, inputs, "MAWU"),
        "prism_mawu_outside": _prism_case(train, models, dataset, inputs, "MAWU", OUTSIDE),
    }
    cases["prism_init"] = _prism_init(dataloader, models, dataset)
    return cases


def _prism_case(train, models, dataset, inputs: dict, loss_name: str, margins: str = "") -> dict:
    """`Trainer.forward_and_get_loss` on the batch; with `margins` (the suffix of the margin inputs) OUTSIDE, the
    figures of its second call, after the first projected the margins (which are recorded)."""
    users, items = torch.tensor(USERS), torch.tensor(ITEMS)
    model = models.RecModel(dataset, N_USERS, N_ITEMS, "MLP", hidden_dim=DIM, depth=0, loss=loss_name).double()
    with torch.no_grad():
        model.user_embedding.weight.copy_(inputs["user_table"])
        model.item_embedding.weight.copy_(inputs["item_table"])
        if loss_name == "MAWU":
            model.user_margin.weight.copy_(inputs[f"user_margin{margins}"][:, None])
            model.item_margin.weight.copy_(inputs[f"item_margin{margins}"][:, None])
    gammas = [GAMMA_DIRECTAU] if loss_name == "align" else [GAMMA_USER, GAMMA_ITEM]
    args = types.SimpleNamespace(
        batched_wd=False,
        lr=1e-3,
        weight_decay=0.0,
        loss=loss_name,
        regs=["uniformity"] if loss_name == "align" else [],
        gammas=gammas,
        neg_ratio=0,
        dataset="MovieLens1M",
    )
    trainer = train.Trainer("MLP", model, torch.device("cpu"), dataset, args)
    n_ids = {
        dataset.user: types.SimpleNamespace(n_id=torch.arange(N_USERS)),
        dataset.item: types.SimpleNamespace(n_id=torch.arange(N_ITEMS)),
    }
    data = type("Batch", (), {"x_dict": {}, "__getitem__": lambda self, k, n_ids=n_ids: n_ids[k]})()
    out = {"function": f"train.py:Trainer.forward_and_get_loss (loss {loss_name})"}
    tables = {"user_table": model.user_embedding.weight, "item_table": model.item_embedding.weight}
    if loss_name == "MAWU":
        tables |= {"user_margin": model.user_margin.weight, "item_margin": model.item_margin.weight}
    if margins == OUTSIDE:
        first = trainer.forward_and_get_loss(data, torch.stack([users, items]))
        out["function"] += ", called twice"
        out |= _projected(model.user_margin, model.item_margin) | _figures(first, tables, "first_")
    loss = trainer.forward_and_get_loss(data, torch.stack([users, items]))
    return out | _figures(loss, tables)


def _projected(user_margin: torch.nn.Embedding, item_margin: torch.nn.Embedding) -> dict:
    """The margin tables as the official call left them (projected onto [0, 1] after its loss)."""
    return {
        "projected_user_margin": user_margin.weight.detach().squeeze(-1).tolist(),
        "projected_item_margin": item_margin.weight.detach().squeeze(-1).tolist(),
    }


def _prism_init(dataloader, models, dataset) -> dict:
    edges = torch.tensor(INIT_EDGES)

    class Split:
        def __getitem__(self, key):
            if isinstance(key, tuple):
                return {"link_index": edges}
            return types.SimpleNamespace(num_nodes=INIT_USERS if key == dataset.user else INIT_ITEMS)

        def to(self, device):
            return self

    dataset.split_save_folder = ""
    real_load, torch.load = torch.load, lambda *a, **k: Split()
    try:
        out = {
            "function": "dataloader.py:Data.get_dataloaders, models.py:RecModel.__init__",
            "edges": INIT_EDGES,
            "n_users": INIT_USERS,
            "n_items": INIT_ITEMS,
            "dim": INIT_DIM,
            "alphas": list(ALPHAS),
        }
        for alpha in ALPHAS:
            _, _, _, user_mag, item_mag, _, _ = dataloader.Data.get_dataloaders(
                dataset, torch.device("cpu"), degree_init_str=alpha
            )
            torch.manual_seed(0)
            model = models.RecModel(
                dataset,
                INIT_USERS,
                INIT_ITEMS,
                "MLP",
                hidden_dim=INIT_DIM,
                depth=0,
                user_mag=user_mag,
                item_mag=item_mag,
            )
            out[f"alpha_{alpha}"] = {
                "user_mag": user_mag.tolist(),
                "item_mag": item_mag.tolist(),
                "user_row_norms": model.user_embedding.weight.detach().norm(dim=1).tolist(),
                "item_row_norms": model.item_embedding.weight.detach().norm(dim=1).tolist(),
            }
    finally:
        torch.load = real_load
    return out


def _recbole_case(module, cls_name: str, inputs: dict, margins: str = "", **params) -> dict:
    """`cls.calculate_loss` with a stand-in self: an MF encoder holding the fixed tables (and margins, gammas); with
    `margins` OUTSIDE, the figures of its second call, after the first projected the margins (recorded)."""
    cls = getattr(module, cls_name)
    encoder = module.MFEncoder(N_USERS, N_ITEMS, DIM).double()
    with torch.no_grad():
        encoder.user_embedding.weight.copy_(inputs["user_table"])
        encoder.item_embedding.weight.copy_(inputs["item_table"])
    me = types.SimpleNamespace(
        restore_user_e=None, restore_item_e=None, USER_ID="user_id", ITEM_ID="item_id", encoder=encoder, **params
    )
    for name in ("alignment", "uniformity", "alignment_margin", "uniformity_dot"):
        if hasattr(cls, name):
            setattr(me, name, getattr(cls, name))
    me.forward = lambda u, i: cls.forward(me, u, i)
    tables = {"user_table": encoder.user_embedding.weight, "item_table": encoder.item_embedding.weight}
    if cls_name == "MAWU":
        me.user_margin, me.item_margin = (
            torch.nn.Embedding(N_USERS, 1).double(),
            torch.nn.Embedding(N_ITEMS, 1).double(),
        )
        with torch.no_grad():
            me.user_margin.weight.copy_(inputs[f"user_margin{margins}"][:, None])
            me.item_margin.weight.copy_(inputs[f"item_margin{margins}"][:, None])
        tables |= {"user_margin": me.user_margin.weight, "item_margin": me.item_margin.weight}
    batch = {"user_id": torch.tensor(USERS), "item_id": torch.tensor(ITEMS)}
    out = {"function": f"recbole/model/general_recommender/{cls_name.lower()}.py:{cls_name}.calculate_loss"}
    if margins == OUTSIDE:
        first = cls.calculate_loss(me, batch)
        out["function"] += ", called twice"
        out |= _projected(me.user_margin, me.item_margin) | _figures(first, tables, "first_")
    return out | _figures(cls.calculate_loss(me, batch), tables)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, help="snap-research/PRISM checkout or bare mirror")
    parser.add_argument("--directau", help="THUwangcy/DirectAU checkout or bare mirror")
    parser.add_argument("--mawu", help="psm1206/MAWU checkout or bare mirror")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    torch.set_default_dtype(torch.float64)
    stubbed = ["torch_geometric", "matplotlib", "recbole"]
    if importlib.util.find_spec("sklearn") is None:
        stubbed.append("sklearn")
    sys.meta_path.insert(0, _StubFinder(stubbed))
    keep, inputs = [], _inputs() | _outside_margins()
    root, commit = _source(args.repo, keep)
    repositories = {"snap-research/PRISM": commit}
    cases = _prism_cases(root, inputs)
    for option, repo, wanted in (
        (args.directau, "THUwangcy/DirectAU", [("directau", "DirectAU")]),
        (args.mawu, "psm1206/MAWU", [("mawu_directau", "DirectAU"), ("mawu", "MAWU"), ("mawu_outside", "MAWU")]),
    ):
        if option is None:
            continue
        root, repositories[repo] = _source(option, keep)
        for key, cls_name in wanted:
            module = _load(f"official_{key}", root / "recbole/model/general_recommender" / f"{cls_name.lower()}.py")
            params = (
                {"gamma": GAMMA_DIRECTAU} if cls_name == "DirectAU" else {"gamma1": GAMMA_USER, "gamma2": GAMMA_ITEM}
            )
            margins = OUTSIDE if key.endswith(OUTSIDE) else ""
            cases[key] = {"repository": repo, **_recbole_case(module, cls_name, inputs, margins, **params)}
    document = {
        "repository": "snap-research/PRISM",
        "commit": commit,
        "repositories": repositories,
        "command": "python3 bench/official/prism.py " + shlex.join(sys.argv[1:] if argv is None else argv),
        "function": "train.py:Trainer.forward_and_get_loss; dataloader.py:Data.get_dataloaders; models.py:RecModel",
        "inputs": {
            "users": USERS,
            "items": ITEMS,
            "gamma": GAMMA_DIRECTAU,
            "gamma_user": GAMMA_USER,
            "gamma_item": GAMMA_ITEM,
            **{k: v.tolist() for k, v in inputs.items()},
        },
        "cases": cases,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(document, indent=1) + "\n")


if __name__ == "__main__":
    main()
