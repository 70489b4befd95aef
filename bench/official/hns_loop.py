"""Golden training loops from the official hard-negative-sampling code (issue 43) -> tests/golden/official/hns_loop.json.

    python3 bench/official/hns_loop.py --repo WWW_2023_CODE_CHECKOUT [--out tests/golden/official/hns_loop.json]

WWW_2023_CODE_CHECKOUT is a checkout of swt-user/WWW_2023_code or a bare mirror (its Python files at HEAD are then
extracted to a temporary folder). For DNS(M, N) (`--sampler 0 --weighted --loss_type 1 --lambda_w M`, the Readme's
command) and Softmax-v(ρ, N) (`--loss_type 2 --lambda_w ρ`) the script runs the unmodified main_more.py as `__main__`
(runpy, sys.argv set to the arguments stored in the JSON) on a tiny `.mat` it writes to a temporary data folder:
`utils.setup_seed` seeds random, numpy and torch (`--fix_seed`), `RecData.get_data` splits each user's items 80/20
(Python's `random`), main() builds `base_sampler` (uniform candidates) and `BaseMF` (N(0, 0.1²) rows), and
`train_model` trains 3 epochs: Adam with coupled weight decay on both whole tables, a new `np.random.permutation`
of the training pairs each epoch cut into `int(n / batch_size) + 1` batches (24 pairs, batch 7: 7, 7, 7 and 3),
`torch.randint` candidates per batch, `loss_function` summed over the batch (`--reduction` False), one Adam step
per batch, `scheduler.step()` (StepLR, here step 1, γ 0.5) after each epoch. CPU, float64 (torch's default dtype).

Nothing official is replaced on the training path; what is random is recorded as it happens:
- the training matrix `get_data` returned (the split), in the order `UserItemData` indexes it (its COO);
- each epoch's `np.random.permutation`, and every `torch.randint` call (each batch's candidates);
- per step, the batch (`BaseMF.forward`'s users and positives) and the loss `loss_function` returned;
- the tables before the first step and after each epoch, with the learning rate, read when `scheduler.step()` is
  called (a StepLR subclass put in torch.optim.lr_scheduler before main_more.py imports it: it records, then steps).
Shims: numpy.lib.function_base (gone in NumPy 2; model.py imports its unused `select`) and `np.int` (removed in NumPy
1.24; `UserItemData.__getitem__` casts with it) set to `int` while the script runs; `utils.Evaluate.test_GPU_model`
(after epoch 0 and at the end; it reads the model under no_grad, draws nothing and changes nothing training reads)
returns zero metrics, because its top-50 and top-200 need more than the tiny input's 9 items.
"""

from __future__ import annotations

import argparse
import contextlib
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

OUT = Path(__file__).resolve().parents[2] / "tests" / "golden" / "official" / "hns_loop.json"
N_USERS, N_ITEMS = 6, 9
# 5 interactions a user: the official split keeps round(0.8 * 5) = 4 of them for training (24 pairs)
INTERACTIONS = [[0, 2, 4, 6, 8], [1, 2, 3, 5, 7], [0, 1, 4, 5, 8], [2, 3, 6, 7, 8], [0, 3, 4, 5, 6], [1, 2, 5, 7, 8]]
COMMON = (
    "--data tiny --data_dir DATA --log_path LOGS --device cpu --fix_seed --seed 10 --model 0 --sampler 0 "
    "--dims 3 --epoch 3 --batch_size 7 --learning_rate 0.05 --weight_decay 0.01 --step_size 1 --gamma 0.5 "
    "--sample_num 5 --weighted"
)
CASES = {"dns": "--loss_type 1 --lambda_w 2", "softmax_v": "--loss_type 2 --lambda_w 1.0"}


def write_data(folder: Path) -> None:
    rows = [user for user, items in enumerate(INTERACTIONS) for _ in items]
    columns = [item for items in INTERACTIONS for item in items]
    matrix = scipy.sparse.csc_matrix((np.ones(len(rows)), (rows, columns)), shape=(N_USERS, N_ITEMS))
    scipy.io.savemat(folder / "tinydata.mat", {"data": matrix})


def tables(model) -> dict:
    return {
        "user_table": model._User_Embedding.weight.detach().tolist(),
        "item_table": model._Item_Embedding.weight.detach().tolist(),
    }


class Recorder:
    """What the run draws and does (see the module docstring)."""

    def __init__(self):
        self.train: dict = {}
        self.permutations: list[list[int]] = []
        self.randint: list[list[list[int]]] = []
        self.steps: list[dict] = []
        self.initial: dict = {}
        self.epochs: list[dict] = []

    @contextlib.contextmanager
    def recording(self, official_dataloader, official_model, official_utils):
        recorder = self
        real_permutation, real_randint = np.random.permutation, torch.randint
        real_step_lr = torch.optim.lr_scheduler.StepLR
        get_data = official_dataloader.RecData.get_data
        forward, loss_function = official_model.BaseMF.forward, official_model.BaseModel.loss_function
        evaluate = official_utils.Evaluate.test_GPU_model

        def recorded_get_data(me, ratio):
            train_mat, test_mat, adj_mat = get_data(me, ratio)
            coo = train_mat.tocoo()
            recorder.train = {"users": coo.row.tolist(), "items": coo.col.tolist()}
            return train_mat, test_mat, adj_mat

        def permutation(*args, **kwargs):
            drawn = real_permutation(*args, **kwargs)
            recorder.permutations.append(drawn.tolist())
            return drawn

        def randint(*args, **kwargs):
            drawn = real_randint(*args, **kwargs)
            recorder.randint.append(drawn.tolist())
            return drawn

        def recorded_forward(model, user_id, pos_id, neg_id):
            recorder.steps.append({"users": user_id.tolist(), "items": pos_id.tolist(), "candidates": neg_id.tolist()})
            return forward(model, user_id, pos_id, neg_id)

        def recorded_loss(*args, **kwargs):
            loss = loss_function(*args, **kwargs)
            recorder.steps[-1]["loss"] = float(loss.detach())
            return loss

        class StepLR(real_step_lr):
            def __init__(self, optimizer, *args, **kwargs):
                self.recording = False
                super().__init__(optimizer, *args, **kwargs)
                self.recording = True
                user_table, item_table = optimizer.param_groups[0]["params"]
                recorder.initial = {
                    "user_table": user_table.detach().tolist(),
                    "item_table": item_table.detach().tolist(),
                }

            def step(self, *args, **kwargs):
                if self.recording:
                    user_table, item_table = self.optimizer.param_groups[0]["params"]
                    recorder.epochs.append(
                        {
                            "lr": self.optimizer.param_groups[0]["lr"],
                            "user_table": user_table.detach().tolist(),
                            "item_table": item_table.detach().tolist(),
                        }
                    )
                return super().step(*args, **kwargs)

        def no_metrics(me, model, train_mat, test_mat):
            zeros = np.zeros(me.topk)
            return {"item_ndcg": zeros, "item_recall": zeros, "item_prec": zeros}

        patches = [
            (official_dataloader.RecData, "get_data", recorded_get_data),
            (np.random, "permutation", permutation),
            (torch, "randint", randint),
            (torch.optim.lr_scheduler, "StepLR", StepLR),
            (official_model.BaseMF, "forward", recorded_forward),
            (official_model.BaseModel, "loss_function", recorded_loss),
            (official_utils.Evaluate, "test_GPU_model", no_metrics),
            (np, "int", int),
        ]
        saved = [(owner, name, owner.__dict__.get(name)) for owner, name, _ in patches]
        for owner, name, value in patches:
            setattr(owner, name, value)
        try:
            yield self
        finally:
            for owner, name, value in saved:
                if value is None:
                    delattr(owner, name)
                else:
                    setattr(owner, name, value)
        assert evaluate is official_utils.Evaluate.test_GPU_model


def run_case(root: Path, arguments: str, scratch: Path) -> dict:
    data, logs = scratch / "data", scratch / "logs"
    data.mkdir()
    write_data(data)
    argv = shlex.split(arguments.replace("DATA", str(data)).replace("LOGS", str(logs)))
    import dataloader as official_dataloader
    import model as official_model
    import utils as official_utils

    recorder = Recorder()
    root_logger = logging.getLogger()
    handlers = list(root_logger.handlers)
    saved_argv, sys.argv = sys.argv, ["main_more.py", *argv]
    try:
        with recorder.recording(official_dataloader, official_model, official_utils):
            runpy.run_path(str(root / "main_more.py"), run_name="__main__")
    finally:
        sys.argv = saved_argv
        for handler in root_logger.handlers[len(handlers) :]:
            handler.close()
        root_logger.handlers[:] = handlers
    n_steps = len(recorder.steps) // len(recorder.epochs)
    assert len(recorder.randint) == len(recorder.steps) and n_steps * len(recorder.epochs) == len(recorder.steps)
    for epoch, record in enumerate(recorder.epochs):
        record["loss_sum"] = sum(step["loss"] for step in recorder.steps[epoch * n_steps : (epoch + 1) * n_steps])
    return {
        "arguments": arguments,
        "train": recorder.train,
        "permutations": recorder.permutations,
        "initial": recorder.initial,
        "epochs": recorder.epochs,
        "steps": recorder.steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="checkout or bare mirror of swt-user/WWW_2023_code")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_default_dtype(torch.float64)
    function_base = types.ModuleType("numpy.lib.function_base")  # gone in NumPy 2; model.py imports an unused name
    function_base.select = None
    sys.modules.setdefault("numpy.lib.function_base", function_base)
    cases = {}
    with tempfile.TemporaryDirectory() as scratch:
        root, commit = checkout(args.repo, Path(scratch), "main_more.py")
        sys.path.insert(0, str(root))
        for name, arguments in CASES.items():
            with tempfile.TemporaryDirectory() as run_folder:
                cases[name] = run_case(root, f"{COMMON} {arguments}", Path(run_folder))
    document = {
        "repository": "swt-user/WWW_2023_code",
        "commit": commit,
        "command": shlex.join(["python3", "bench/official/hns_loop.py", *sys.argv[1:]]),
        "function": "main_more.py run as __main__ (main, train_model: Adam, StepLR, np.random.permutation batches), "
        "sampler.py:base_sampler, model.py:BaseMF, BaseModel.loss_function; main_more.py's arguments per case",
        "inputs": {"n_users": N_USERS, "n_items": N_ITEMS, "interactions": INTERACTIONS},
        "cases": cases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
