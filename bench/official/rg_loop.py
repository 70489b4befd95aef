"""Golden training loops from the RG² / RG× authors' code (issue 43) -> tests/golden/official/rg_loop.json.

    python3 bench/official/rg_loop.py --repo RG2_CHECKOUT --recstudio RECSTUDIO_CHECKOUT [--out ...]

RG2_CHECKOUT is a checkout (or bare mirror) of yuanhao53/RG2, RECSTUDIO_CHECKOUT one of ustcml/RecStudio, the library
the RG2 README runs it in (its `recstudio` folder is put on sys.path, as the README says). For RG² and RG× the
script runs the unmodified RG2 `run.py` as `__main__` (runpy; its `model_class` is RG2, so RG× runs the same script
with `rg2.RG2` bound to `rgx.RGX` before it imports it) in a temporary working folder holding what run.py reads
from there: `./config.yaml` (the repository's, with the tiny run's values below) and `./ml-10m.yaml` (the
repository's, without its item features `movies.dat`: RG reads the ids only, and RecStudio's parsing of the titles'
token sequences fails under pandas 3), and, in RecStudio's dataset folder `./.recstudio/ml-10m/`, a tiny
`ratings.dat` in ML-10M's format, so that RecStudio reads it instead of downloading ML-10M. RecStudio then filters
(5 interactions per user and item, ratings of at least 3), splits each user's interactions 80/10/10 (shuffled,
seeded), builds the ALSDataset's user loader and its transpose, and `Recommender.fit` runs `fit_loop`: each epoch
one half-step over one loader (users in even epochs, items in odd ones: `current_epoch_trainloaders`), the
Gramian of the other side computed once at the epoch's start (`training_epoch`), a validation after every epoch
(`val_n_epoch: 1`), and RecStudio's EarlyStopping (`early_stop_patience`, mode max on the first validation metric,
ndcg@cutoff) ends the run. CPU, float64 (torch's default dtype).

One change on the training path: the published code does not run with RecStudio at HEAD (whose `training_epoch`
has not changed since 2023-08): RecStudio calls `loss['loss'].backward()` on the constant `torch.tensor(0.0)` that
`training_step` returns, which raises; the script wraps `training_step` to return that loss as a leaf that requires
a gradient (its backward then reaches nothing; no optimizer exists, `_get_optimizers` returns None).

The loop draws nothing that its results depend on: the factors start from RecStudio's normal initialisation
(recorded before the first epoch); the loaders' shuffled order does not change a half-step (each row's solve reads
the other side's table only). Recorded:
- the split RecStudio made (training and validation pairs, RecStudio's 1-based ids) and the sizes;
- the factor tables before the first epoch and after each one, each epoch's validation metrics (`logged_metrics`,
  read after `validation_epoch_end`), the epoch EarlyStopping kept (`best_ckpt`) and the number of epochs run.
Stubs (nothing the loop computes): nni (imported; used only in tune mode), torch.utils.tensorboard (a SummaryWriter
that writes nothing), torchmetrics (imported by recstudio.eval; the ndcg and mrr used here are RecStudio's own),
`pydantic.utils.deep_update` (pydantic 2 moved it to pydantic.v1.utils), requests (downloads only),
sklearn.preprocessing (float fields' preprocessing, not configured for ML-10M), `dict2markdown_table` in
recommender.py (the configuration as a TensorBoard text, which needs the tabulate package); `Recommender.evaluate`
on the test split after `fit` is not run (run.py's last line; the recorded loop has ended by then);
`recstudio/model/__init__.py` is not run (it imports RecStudio's other models, whose dependencies are not
installed): `recstudio.model` is a package whose submodules import as usual.
"""

from __future__ import annotations

import argparse
import functools
import importlib.machinery
import json
import os
import runpy
import shlex
import sys
import tempfile
import types
from pathlib import Path

import torch
import yaml
from checkout import checkout

OUT = Path(__file__).resolve().parents[2] / "tests" / "golden" / "official" / "rg_loop.json"
N_USERS, N_ITEMS = 8, 7
# ML-10M's ratings.dat lines user::movie::rating::timestamp; every user rates 5-6 movies (>= 3 stars), every movie
# is rated by at least 5 users, so RecStudio's filters keep them all
RATED = [
    [1, 2, 3, 4, 5],
    [2, 3, 5, 6, 7],
    [1, 3, 4, 6, 7],
    [1, 2, 4, 5, 7, 6],
    [2, 3, 4, 5, 6],
    [1, 3, 5, 6, 7],
    [1, 2, 4, 6, 7],
    [1, 2, 3, 5, 7],
]
TINY_RUN = {
    "model": {"embed_dim": 3},
    "train": {
        "accelerator": "cpu",
        "gpu": None,
        "batch_size": 3,
        "epochs": 12,
        "early_stop_patience": 2,
        "num_threads": 1,
        "alpha": 0.3,
        "lambda": 0.5,
        "beta": 0.2,
        "seed": 2022,
    },
    "eval": {"batch_size": 4, "cutoff": [3], "topk": 3},
}
MODELS = {"rg2": "RG2", "rgx": "RGX"}
# the names recstudio/data/dataset.py takes from `sklearn.preprocessing import *` (for float fields' preprocessing,
# which ML-10M's configuration does not ask for)
SCALERS = [
    "MinMaxScaler",
    "StandardScaler",
    "MaxAbsScaler",
    "RobustScaler",
    "Normalizer",
    "Binarizer",
    "KBinsDiscretizer",
    "KernelCenterer",
    "QuantileTransformer",
    "PowerTransformer",
    "SplineTransformer",
    "FunctionTransformer",
]


class SummaryWriter:
    def __init__(self, log_dir=None, *args, **kwargs):
        self.log_dir = log_dir

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def module(name: str, **attributes) -> types.ModuleType:
    made = types.ModuleType(name)
    made.__spec__ = importlib.machinery.ModuleSpec(name, None)
    made.__dict__.update(attributes)
    return made


def stub_modules() -> None:
    nothing = lambda *args, **kwargs: None  # noqa: E731
    from pydantic.v1.utils import deep_update

    metrics = module("torchmetrics")
    metrics.functional = module("torchmetrics.functional")
    sys.modules.update(
        {
            "nni": module(
                "nni", get_next_parameter=dict, report_intermediate_result=nothing, report_final_result=nothing
            ),
            "torch.utils.tensorboard": module("torch.utils.tensorboard", SummaryWriter=SummaryWriter),
            "torchmetrics": metrics,
            "torchmetrics.functional": metrics.functional,
            "pydantic.utils": module("pydantic.utils", deep_update=deep_update),
            "requests": module("requests"),
            "sklearn": module("sklearn"),
            "sklearn.preprocessing": module("sklearn.preprocessing", **dict.fromkeys(SCALERS), __all__=SCALERS),
        }
    )


def write_inputs(folder: Path, rg2_root: Path) -> None:
    config = yaml.safe_load((rg2_root / "config.yaml").read_text())
    for group, values in TINY_RUN.items():
        config[group].update(values)
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    dataset = (rg2_root / "ml-10m.yaml").read_text()
    assert "item_feat_name: [movies.dat]" in dataset
    (folder / "ml-10m.yaml").write_text(dataset.replace("item_feat_name: [movies.dat]", "item_feat_name: ~"))
    data = folder / ".recstudio" / "ml-10m"
    data.mkdir(parents=True)
    lines = [f"{user}::{movie}::4::{1000 * user + movie}" for user, movies in enumerate(RATED, 1) for movie in movies]
    (data / "ratings.dat").write_text("\n".join(lines) + "\n")


def split_pairs(data) -> list[list[int]]:
    """(user, item) pairs of a split, RecStudio's ids (1-based): its `data_index` rows [user, start, end) over
    `inter_feat`."""
    users, items = data.inter_feat.get_col(data.fuid), data.inter_feat.get_col(data.fiid)
    pairs = []
    for user, start, end in data.data_index.tolist():
        pairs += [[int(users[k]), int(items[k])] for k in range(start, end)]
        assert all(pair[0] == user for pair in pairs[-(end - start) :] or [[user]])
    return pairs


def tables(model) -> dict:
    return {
        "user_table": model.query_encoder.weight[1:].tolist(),
        "item_table": model.item_encoder.weight[1:].tolist(),
    }


def model_package(recstudio_root: Path) -> None:
    """`recstudio.model` as a package whose __init__ (importing RecStudio's model zoo: ae, fm, kg, mf, seq, with
    their own dependencies) is not run; its submodules (basemodel, scorer, init, loss_func) import as usual."""
    import recstudio

    package = module("recstudio.model", __path__=[str(recstudio_root / "recstudio" / "model")])
    sys.modules["recstudio.model"] = package
    recstudio.model = package


def differentiable_loss(training_step):
    """The official training_step, its constant loss handed back as a leaf that requires a gradient: RecStudio's
    `training_epoch` calls `loss['loss'].backward()` on it, which raises for the tensor(0.0) the step returns."""

    @functools.wraps(training_step)
    def step(model, batch):
        out = training_step(model, batch)
        out["loss"] = out["loss"].detach().requires_grad_()
        return out

    return step


def run_case(rg2_root: Path, model_name: str, work: Path) -> dict:
    from recstudio.model.basemodel import recommender

    record: dict = {"epochs": []}
    saved = {
        "fit": recommender.Recommender.fit,
        "fit_loop": recommender.Recommender.fit_loop,
        "end": recommender.Recommender.training_epoch_end,
        "evaluate": recommender.Recommender.evaluate,
        "markdown": recommender.dict2markdown_table,
    }

    def fit(model, train_data, val_data=None, *args, **kwargs):
        record["train"] = split_pairs(train_data)
        record["valid"] = split_pairs(val_data)
        return saved["fit"](model, train_data, val_data, *args, **kwargs)

    def fit_loop(model, val_dataloader=None):
        record["initial"] = tables(model)
        record["n_users"], record["n_items"] = model.M, model.N
        out = saved["fit_loop"](model, val_dataloader)
        record["best_epoch"] = model.callback.best_ckpt["epoch"]
        record["best_metric"] = {k: float(v) for k, v in model.callback.best_ckpt["metric"].items() if k != "epoch"}
        record["best"] = {
            "user_table": model.callback.best_ckpt["parameters"]["query_encoder.weight"][1:].tolist(),
            "item_table": model.callback.best_ckpt["parameters"]["item_encoder.weight"][1:].tolist(),
        }
        return out

    def training_epoch_end(model, output_list):
        metrics = {k: float(v) for k, v in model.logged_metrics.items() if not k.startswith("train_")}
        record["epochs"].append({**metrics, **tables(model)})
        return saved["end"](model, output_list)

    recommender.Recommender.fit = fit
    recommender.dict2markdown_table = lambda *args, **kwargs: ""
    recommender.Recommender.fit_loop = fit_loop
    recommender.Recommender.training_epoch_end = training_epoch_end
    recommender.Recommender.evaluate = lambda model, test_data, verbose=True, **kwargs: {}
    cwd = os.getcwd()
    os.chdir(work)
    try:
        import rg2
        import rgx

        for cls in (rg2.RG2, rgx.RGX):
            saved[cls] = cls.training_step
            cls.training_step = differentiable_loss(cls.training_step)
        if model_name == "rgx":
            rg2.RG2 = rgx.RGX
        runpy.run_path(str(rg2_root / "run.py"), run_name="__main__")
    finally:
        os.chdir(cwd)
        for cls in (rg2.RG2, rgx.RGX):
            cls.training_step = saved[cls]
        recommender.Recommender.fit = saved["fit"]
        recommender.dict2markdown_table = saved["markdown"]
        recommender.Recommender.fit_loop = saved["fit_loop"]
        recommender.Recommender.training_epoch_end = saved["end"]
        recommender.Recommender.evaluate = saved["evaluate"]
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="checkout or bare mirror of yuanhao53/RG2")
    parser.add_argument("--recstudio", type=Path, required=True, help="checkout or bare mirror of ustcml/RecStudio")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_default_dtype(torch.float64)
    stub_modules()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        (scratch / "rg2").mkdir()
        (scratch / "recstudio").mkdir()
        rg2_root, commit = checkout(args.repo, scratch / "rg2", "rg2.py", (".py", ".yaml"))
        recstudio_root, recstudio_commit = checkout(
            args.recstudio, scratch / "recstudio", "recstudio", (".py", ".yaml")
        )
        sys.path[:0] = [str(rg2_root), str(recstudio_root)]
        model_package(recstudio_root)
        document = {
            "repository": "yuanhao53/RG2",
            "commit": commit,
            "recstudio_repository": "ustcml/RecStudio",
            "recstudio_commit": recstudio_commit,
            "command": shlex.join(["python3", "bench/official/rg_loop.py", *sys.argv[1:]]),
            "function": "run.py (as __main__) with rg2.py:RG2 / rgx.py:RGX (training_epoch, training_step, "
            "current_epoch_trainloaders, _get_train_loaders) in RecStudio's Recommender.fit, fit_loop, "
            "training_epoch, EarlyStopping and ALSDataset",
            "config_overrides": TINY_RUN,
            "rated": RATED,
        }
        for name in MODELS:
            work = scratch / f"work_{name}"
            work.mkdir()
            write_inputs(work, rg2_root)
            document[name] = run_case(rg2_root, name, work)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, separators=(",", ":")) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
