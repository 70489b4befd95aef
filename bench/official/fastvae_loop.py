"""Golden training loops from the FastVAE paper's official code (issue 43) -> tests/golden/official/fastvae_loop.json.

    python3 bench/official/fastvae_loop.py --repo FASTVAE_CHECKOUT [--out tests/golden/official/fastvae_loop.json]

FASTVAE_CHECKOUT is a checkout of HERECJ/FastVae_Gpu or a bare mirror (its Python files at HEAD are then extracted
to a temporary folder). For Mult-VAE (`--sampler 0`: BaseVAE, full softmax), FastVAE with MIDX_Uni (`--sampler 3`)
and FastVAE with MIDX_Pop (`--sampler 4`) the script runs the unmodified `run_mm.py` as `__main__` (runpy, sys.argv
set to the arguments stored in the JSON) on a tiny `<name>data.mat` it writes to a temporary data folder: run_mm.py
seeds everything (`utils.setup_seed`), splits the matrix (`RecData.get_data`, Python's `random`), builds the model,
and `train_model` trains 3 epochs: its Adam with weight decay, its StepLR stepped after each epoch, its shuffled
user DataLoader (over `UserItemData`'s own permutation of the users), and, for FastVAE, the MIDX sampler built anew
(k-means from random items) before each epoch from the item table as the previous epoch left it. CPU, float64
(torch's default dtype). The official code has no exact-softmax MIDX (recx's `midx`): run_mm.py's samplers are 0-4.

Nothing on the training path is replaced; everything random is recorded as it happens:
- each batch's users (`UserItemData.__getitem__` of the training set: its permuted user at the DataLoader's index);
- each dropout's kept entries (a forward hook on the model's nn.Dropout in training mode; the input has no zero);
- each reparameterisation's ε (`torch.randn_like`);
- each k-means start (the first `torch.randperm` of each `kmeans` call: its first K entries are the initial
  centroids' items; the later calls re-seed empty clusters, none empties here: checked);
- each sampler call's negatives, 1-based (a forward hook on the sampler);
- each batch's loss (the model's forward output, `loss.item()`, the KL not added: run_mm.py adds it as a constant)
  and the parameters before the first step and at each "Epoch e" log line (after the previous epoch's steps and
  StepLR step, before the epoch's MIDX rebuild), and at the end.
Stubs: sklearn (imported by sampler_gpu_mm.py, unused), `utils.Eval.evaluate_item` (the evaluation run_mm.py runs
after epoch 0 and at the end: its top-50 needs more than the tiny input's 8 items; it reads the model in eval mode
and changes nothing the training reads) returns zero metrics.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import logging
import runpy
import shlex
import sys
import tempfile
import types
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse
import torch
from checkout import checkout

OUT = Path(__file__).resolve().parents[2] / "tests" / "golden" / "official" / "fastvae_loop.json"
N_USERS, N_ITEMS = 6, 8
INTERACTIONS = [  # 5 a user: the official split keeps round(0.8 * 5) = 4 of them for training
    [0, 1, 3, 5, 6],
    [1, 2, 4, 6, 7],
    [0, 1, 5, 3, 2],
    [1, 3, 4, 7, 6],
    [2, 5, 6, 0, 4],
    [7, 0, 2, 4, 5],
]
COMMON = (
    "-data tiny --data_dir DATA --log_path LOGS -d 4 2 -s 3 --cluster_num 2 -b 4 -e 3 -lr 0.01 -w 0.01 "
    "--step_size 1 --gamma 0.5 --device cpu --num_workers 0 --seed 20"
)
CASES = {"multvae": "--sampler 0", "midx_uni": "--sampler 3", "midx_pop": "--sampler 4"}


def stub_modules() -> None:
    try:
        import sklearn.cluster  # noqa: F401
    except ImportError:
        stub = types.ModuleType("sklearn")
        stub.cluster = types.ModuleType("sklearn.cluster")
        stub.cluster.KMeans = None
        for module in (stub, stub.cluster):  # torch._dynamo, imported by the optimizer, looks the module up
            module.__spec__ = importlib.machinery.ModuleSpec(module.__name__, None)
        sys.modules.update({"sklearn": stub, "sklearn.cluster": stub.cluster})


def write_data(folder: Path) -> None:
    rows = [user for user, items in enumerate(INTERACTIONS) for _ in items]
    columns = [item for items in INTERACTIONS for item in items]
    matrix = scipy.sparse.csc_matrix((np.ones(len(rows)), (rows, columns)), shape=(N_USERS, N_ITEMS))
    scipy.io.savemat(folder / "tinydata.mat", {"data": matrix})


def parameters(model) -> dict:
    return {name: value.detach().tolist() for name, value in model.named_parameters()}


class Recorder(logging.Handler):
    def __init__(self):
        super().__init__()
        self.model, self.initial, self.snapshots = None, None, []
        self.users, self.keep, self.noise, self.kmeans_starts, self.negatives, self.losses = [], [], [], [], [], []
        self.train_data, self.train = None, None

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if (message.startswith("Epoch ") and message != "Epoch 0") or message.startswith("  Initial Time"):
            self.snapshots.append(parameters(self.model))

    def forward_hook(self, module, inputs, output):
        import sampler_gpu_mm
        import vae_models

        if isinstance(module, torch.nn.Dropout) and module.training:
            assert bool((inputs[0] != 0).all())
            self.keep.append((output != 0).tolist())
        elif isinstance(module, sampler_gpu_mm.SamplerBase):
            self.negatives.append(output[1].tolist())
        elif isinstance(module, vae_models.BaseVAE) and module.training:
            self.losses.append(output[2].item())

    def forward_pre_hook(self, module, inputs):
        import vae_models

        if isinstance(module, vae_models.BaseVAE) and module.training and self.model is None:
            self.model, self.initial = module, parameters(module)


def run_case(root: Path, argv: list[str]) -> dict:
    import dataloader
    import sampler_gpu_mm
    import utils

    recorder = Recorder()
    logging.getLogger().addHandler(recorder)
    hooks = [
        torch.nn.modules.module.register_module_forward_hook(recorder.forward_hook),
        torch.nn.modules.module.register_module_forward_pre_hook(recorder.forward_pre_hook),
    ]
    saved = {
        "randn_like": torch.randn_like,
        "randperm": torch.randperm,
        "getitem": dataloader.UserItemData.__getitem__,
        "init": dataloader.UserItemData.__init__,
        "get_data": dataloader.RecData.get_data,
        "evaluate_item": utils.Eval.evaluate_item,
    }
    kmeans_code = sampler_gpu_mm.kmeans.__code__

    def randn_like(x, *args, **kwargs):
        noise = saved["randn_like"](x, *args, **kwargs)
        recorder.noise.append(noise.tolist())
        return noise

    def randperm(n, *args, **kwargs):
        drawn = saved["randperm"](n, *args, **kwargs)
        frame = sys._getframe(1)
        if frame.f_code is kmeans_code:
            if "iter" not in frame.f_locals:  # before the loop: the start
                recorder.kmeans_starts.append(drawn[: frame.f_locals["K"]].tolist())
            else:
                assert int(frame.f_locals["ndead"]) == 0, "an empty cluster was re-seeded"
        return drawn

    def init(self, train_mat, train_flag=True):
        saved["init"](self, train_mat, train_flag)
        if train_flag:
            recorder.train_data = self

    def getitem(self, idx):
        if self is recorder.train_data:
            recorder.users.append(int(self.users[idx]))
        return saved["getitem"](self, idx)

    def get_data(self, ratio):
        train, test = saved["get_data"](self, ratio)
        recorder.train = [[int(u), int(i)] for u, i in zip(*train.nonzero(), strict=True)]
        return train, test

    def evaluate_item(*args, **kwargs):
        return {"item_ndcg": np.zeros(50), "item_recall": np.zeros(50)}

    torch.randn_like, torch.randperm = randn_like, randperm
    dataloader.UserItemData.__init__, dataloader.UserItemData.__getitem__ = init, getitem
    dataloader.RecData.get_data = get_data
    utils.Eval.evaluate_item = staticmethod(evaluate_item)
    saved_argv = sys.argv
    sys.argv = [str(root / "run_mm.py"), *argv]
    try:
        runpy.run_path(str(root / "run_mm.py"), run_name="__main__")
    finally:
        sys.argv = saved_argv
        torch.randn_like, torch.randperm = saved["randn_like"], saved["randperm"]
        dataloader.UserItemData.__init__, dataloader.UserItemData.__getitem__ = saved["init"], saved["getitem"]
        dataloader.RecData.get_data = saved["get_data"]
        utils.Eval.evaluate_item = staticmethod(saved["evaluate_item"])
        for hook in hooks:
            hook.remove()
        for handler in list(logging.getLogger().handlers):
            logging.getLogger().removeHandler(handler)
    return {
        "train": recorder.train,
        "initial": recorder.initial,
        "users": recorder.users,
        "dropout_keep": recorder.keep,
        "noise": recorder.noise,
        "kmeans_starts": recorder.kmeans_starts,
        "negatives": recorder.negatives,
        "losses": recorder.losses,
        "epochs": recorder.snapshots,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="checkout or bare mirror of HERECJ/FastVae_Gpu")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_default_dtype(torch.float64)
    stub_modules()
    document = {
        "repository": "HERECJ/FastVae_Gpu",
        "command": shlex.join(["python3", "bench/official/fastvae_loop.py", *sys.argv[1:]]),
        "function": "run_mm.py (as __main__): main, train_model, with dataloader.py RecData, UserItemData; "
        "vae_models.py BaseVAE, VAE_Sampler; sampler_gpu_mm.py kmeans, MidxUniform, MidxUniPop",
        "interactions": INTERACTIONS,
        "n_users": N_USERS,
        "n_items": N_ITEMS,
    }
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        (scratch / "code").mkdir()
        root, commit = checkout(args.repo, scratch / "code", "run_mm.py")
        sys.path.insert(0, str(root))
        document["commit"] = commit
        for name, flags in CASES.items():
            data, logs = scratch / f"data_{name}", scratch / f"logs_{name}"
            data.mkdir()
            write_data(data)
            command = f"{COMMON} {flags}"
            argv = shlex.split(command.replace("DATA", str(data)).replace("LOGS", str(logs)))
            document[name] = {"run_mm_arguments": command, **run_case(root, argv)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, separators=(",", ":")) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
