"""The FastVAE paper's official code at the paper's budget, on recx's split, scored by recx's evaluator (issue 57 §2).

    python3 bench/official/fastvae_run.py --repo FASTVAE_CHECKOUT --data DATA_ROOT/ml10m-fastvae --out FOLDER \
        [--sampler 4] [--sample-num 200] [--epochs 200]

FASTVAE_CHECKOUT is a checkout of HERECJ/FastVae_Gpu or a bare mirror. The script runs the unmodified `run_mm.py` as
`__main__` (runpy, sys.argv the paper's protocol, §7.1.4 and run_mm.py's defaults: [M -> 200 -> 32], batch 256, Adam
lr 0.001 with weight decay 0.01, the rate times 0.95 every 5 epochs, 16 codewords, `--sample_num` items a user,
`--sampler` 0 Mult-VAE, 3 MIDX_Uni, 4 MIDX_Pop) on the CPU with one data-loading process. One thing is replaced:
`RecData.get_data` returns recx's prepared split (train and test of DATA, a `recx prepare`d per-user 80/20 folder)
instead of the official code's own random 80/20 draw, so the official model and recx's are scored on the same test
interactions. Everything else (seeding, model, sampler, k-means, loop, StepLR, its evaluation of 5,000 random users
every 10 epochs and at the end) is the official code as it is, with one shim of NumPy 2: `np.int = int` (removed in
NumPy 2, read by `utils.Eval.topk_search`).

After the run the trained model's top-50 of every user (the official scoring: `_get_user_emb` of the training
history against `_get_item_emb()`, as run_mm.py's `evaluate`; training items excluded) is written as a lists file in
the dataset's original ids, and `recx eval --lists` scores it over all test users with recx's metrics. FOLDER gets
`official.log` (run_mm.py's log), `lists.parquet`, `eval/` (recx's evaluation) and `result.json` (the arguments, the
commit, the official evaluator's NDCG/Recall@5,10,50 every 10 epochs and at the end and recx's NDCG/Recall@50, seconds per epoch).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import runpy
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse
import torch
from checkout import checkout
from fastvae_loop import stub_modules

ARGUMENTS = "-data {name} --data_dir {data} --log_path {logs} -d 200 32 -b 256 -lr 0.001 -w 0.01 --cluster_num 16 "
ARGUMENTS += "--step_size 5 --gamma 0.95 --device cpu --num_workers 0 --seed 20"
RESULT = re.compile(r"Eval_Res : (NDCG|RECALL)@5,10,50 ([0-9.]+), ([0-9.]+), ([0-9.]+)")


def split(folder: Path) -> tuple[scipy.sparse.csr_matrix, scipy.sparse.csr_matrix]:
    """recx's prepared train and test as users x items matrices of ones (recx's contiguous indices)."""
    shape = (len(pd.read_parquet(folder / "users.parquet")), len(pd.read_parquet(folder / "items.parquet")))
    matrices = []
    for name in ("train", "test"):
        table = pd.read_parquet(folder / f"{name}.parquet", columns=["user", "item"])
        ones = np.ones(len(table), dtype=np.float64)
        matrices.append(scipy.sparse.csr_matrix((ones, (table["user"], table["item"])), shape=shape))
    return matrices[0], matrices[1]


class Capture(logging.Handler):
    """The official log's evaluation lines and each epoch's start time; the model the loop trains."""

    def __init__(self):
        super().__init__()
        self.model, self.results, self.epoch_starts = None, [], []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Epoch "):
            self.epoch_starts.append(time.perf_counter())
        found = RESULT.search(message)
        if found:
            self.results.append((found.group(1).lower(), [float(v) for v in found.group(2, 3, 4)]))

    def pre_hook(self, module, inputs):
        if self.model is None and type(module).__name__ in ("BaseVAE", "VAE_Sampler"):
            self.model = module


def top_lists(namespace: dict, model, train: scipy.sparse.csr_matrix, k: int, folder: Path) -> pd.DataFrame:
    """Each user's top-k items by run_mm.py's own scoring (`get_user_embs` x `_get_item_emb()`), train excluded."""
    model.eval()
    with torch.no_grad():
        users = namespace["get_user_embs"](train, model, torch.device("cpu"))
        items = model._get_item_emb()
        ranked = []
        for start in range(0, train.shape[0], 2048):
            scores = users[start : start + 2048] @ items.T
            rows = train[start : start + 2048].tocoo()
            scores[torch.as_tensor(rows.row, dtype=torch.long), torch.as_tensor(rows.col, dtype=torch.long)] = -np.inf
            ranked.append(torch.topk(scores, k, dim=1).indices)
        top = torch.cat(ranked).numpy()
    user_ids = pd.read_parquet(folder / "users.parquet")["id"].to_numpy()
    item_ids = pd.read_parquet(folder / "items.parquet")["id"].to_numpy()
    return pd.DataFrame(
        {
            "user": np.repeat(user_ids, k),
            "item": item_ids[top.reshape(-1)],
            "rank": np.tile(np.arange(1, k + 1), len(user_ids)),
        }
    )


def run_official(root: Path, argv: list[str], train, test) -> tuple[dict, Capture]:
    import dataloader

    capture = Capture()
    logging.getLogger().addHandler(capture)
    hook = torch.nn.modules.module.register_module_forward_pre_hook(capture.pre_hook)
    dataloader.RecData.get_data = lambda self, ratio: (train, test)
    saved_argv, sys.argv = sys.argv, [str(root / "run_mm.py"), *argv]
    try:
        namespace = runpy.run_path(str(root / "run_mm.py"), run_name="__main__")
    finally:
        sys.argv = saved_argv
        hook.remove()
    return namespace, capture


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="checkout or bare mirror of HERECJ/FastVae_Gpu")
    parser.add_argument("--data", type=Path, required=True, help="a recx-prepared per-user 80/20 dataset folder")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--sampler", type=int, default=4, help="run_mm.py --sampler: 0 Mult-VAE, 3 MIDX_Uni, 4 MIDX_Pop"
    )
    parser.add_argument("--sample-num", type=int, default=200, help="sampled items a user (ML10M 200, Gowalla 1000)")
    parser.add_argument("--epochs", type=int, default=200)
    args = parser.parse_args()
    stub_modules()
    np.int = int  # type: ignore[attr-defined]
    args.out.mkdir(parents=True, exist_ok=True)
    train, test = split(args.data)
    with tempfile.TemporaryDirectory() as scratch:
        root, commit = checkout(args.repo, Path(scratch), "run_mm.py")
        sys.path.insert(0, str(root))
        logs = Path(scratch) / "logs"
        command = ARGUMENTS.format(name=args.data.name, data=scratch, logs=logs)
        command += f" -e {args.epochs} --sampler {args.sampler} -s {args.sample_num}"
        started = time.perf_counter()
        namespace, capture = run_official(root, shlex.split(command), train, test)
        seconds = time.perf_counter() - started
        (args.out / "official.log").write_text("".join(p.read_text() for p in sorted(logs.glob("*.txt"))))
    lists = top_lists(namespace, capture.model, train, 50, args.data)
    lists.to_parquet(args.out / "lists.parquet", index=False)
    evaluation = args.out / "eval"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "recx",
            "eval",
            "--lists",
            str(args.out / "lists.parquet"),
            "--dataset",
            args.data.name,
            "--data-root",
            str(args.data.parent),
            "--ks",
            "50",
            "--name",
            f"official-sampler{args.sampler}",
            "--out",
            str(evaluation),
            "--quiet",
            "--force",
        ],
        check=True,
    )
    rows = pd.read_parquet(evaluation / "results.parquet").query("stratum == 'all'")
    metrics = {f"{row.metric}@{row.k}": float(row.value) for row in rows.itertuples()}
    evaluations = [dict(capture.results[i : i + 2]) for i in range(0, len(capture.results), 2)]
    epochs = np.diff(capture.epoch_starts)
    document = {
        "repository": "HERECJ/FastVae_Gpu",
        "commit": commit,
        "command": shlex.join(["python3", "bench/official/fastvae_run.py", *sys.argv[1:]]),
        "run_mm_arguments": command.replace(scratch, "DATA").replace(str(logs), "LOGS"),
        "dataset": args.data.name,
        "official_evaluator": {
            "what": "run_mm.py's evaluate: NDCG and Recall at 5, 10, 50 of 5,000 random users, after epochs 0, 10, 20, "
            "... and at the end (the last entry)",
            "evaluations": evaluations,
        },
        "recx_eval": metrics,
        "seconds": seconds,
        "seconds_per_epoch_median": float(np.median(epochs)) if len(epochs) else None,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    (args.out / "result.json").write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps({"official": evaluations[-1], "recx": metrics}, indent=2))


if __name__ == "__main__":
    main()
