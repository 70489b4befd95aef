"""The PRISM paper's official code at its protocol, on recx's split, to its early stop (issue 57 §2).

    python3 bench/official/prism_run.py --repo PRISM_CHECKOUT --data DATA_ROOT/gowalla-prism --out FOLDER \
        [--epochs 1000] [--seed 123] [--pyg /work/pyg | --stand-ins]

PRISM_CHECKOUT is a checkout of snap-research/PRISM or a bare mirror (its Python files at HEAD are then extracted to
a temporary folder). The script runs the unmodified `train.py` and then `test.py` as `__main__` (runpy, sys.argv as
run_train_prism.sh and test.sh call them, cwd a scratch folder) on the CPU, or on CUDA where torch sees one (the
official code picks it itself):

- train.py, the MAWU + PRISM row of Table 1 for MF: `--model MLP --num_layers 0` (MF), `--hidden_dim 64`, `--loss
  MAWU --neg_ratio 0 --batch_size 4096` (run_train_prism.sh's MAWU branch), `--reg_types -1` (test.sh's REGS for
  MAWU; train.py reads no regularizer for MAWU, and the two scripts find the model by this name), `--gamma_vals
  2.6,1.4` (the MAWU authors' Gowalla/MF gamma_user and gamma_item, which the paper's App. B.1 defers to, as recx's
  `prism-headline` sets them; run_train_prism.sh's GAMMA 1.0 is one value, and MAWULoss reads two), `--lr 0.001
  --weight_decay 0.0 --degree_init True --degree_init_str 1.0 --patience 10 --epochs 1000 --overwrite True`
  (run_train_prism.sh's defaults). `--seed 123`: the script's first seed (SEEDS=(123 246 492)), not recx's 0; it
  seeds train.py's `seed_everything` (the tables', margins' and MAWU's draws) and the training order below. The loop
  validates by NDCG@20 (dot product and cosine) after every epoch, stops after 10 epochs without a gain in the dot
  product NDCG@20 and keeps the best model (train.py's `Trainer.train_model`); `--epochs` is its own cap.
- test.py (test.sh's call: `--model MLP --loss MAWU --hidden_dim 64 --reg_types -1`, `--k` its default 20) loads the
  best model train.py saved and prints the test NDCG@20 (train and validation items masked) overall and on the
  popular 5%, neutral 15% and unpopular 80% of items. The official code computes no Recall.

`--dataset MovieLens1M`: utils.ALL_DATASET_ATTRS has no Gowalla entry (train.py's `Data(...)` raises KeyError for
it), and the name selects nothing else on this path (the node and edge type names `user`, `rates`, `movie`, the
split files' folder, which is replaced, and IPL's coefficient, not used).

Replaced (nothing official is edited):
- The data source. `torch.load` of the split files (`train_123.pt`, `val_123.pt`, `test_123.pt`, which
  dataloader.py's `load_and_split_data` writes from its own RandomLinkSplit) returns recx's prepared split of DATA
  (train, valid, test parquet) as the objects RandomLinkSplit leaves: a HeteroData per split, `user` and `movie`
  node stores with `num_nodes` and the empty `x` load_and_split_data sets, the training edges as `edge_index` (and
  reversed as `rated_by`), the split's own edges as `link_index` with `link` labels of one. So the official model is
  trained, validated and tested on exactly the interactions recx's runs use. The training edges are in one random
  order (torch.randperm from a generator of its own seeded with --seed, leaving the global generator untouched): the
  split file RandomLinkSplit writes holds them in its random permutation's order, and train.py's loader, which does
  not shuffle, takes every epoch in that stored order. It is not the official order (that is of the official split)
  nor recx's (its own draw). The checkpoints train.py saves are read with the real torch.load.
- torch_geometric.loader.LinkNeighborLoader, by bench/official/prism_loop.py's stand-in (imported, not copied):
  consecutive batches of the training edges in their stored order, each batch's `n_id` its distinct users and
  items in ascending order and its `edge_label_index` the edges' positions among them, as torch_geometric 2.4.0
  (environment.yml's pin) builds it with `num_neighbors=[]` (MF: no hop) and `shuffle=False`; prism_loop.py's
  docstring says why; tests/test_official_prism.py holds recx's loop to the official loop it drives. The real loader cannot sample here:
  its NeighborSampler needs the compiled pyg-lib or torch-sparse, which cannot be installed.
- Everything else of torch_geometric is the real package (2.8.1 from --pyg, default /work/pyg, appended to
  sys.path after the environment's packages): `seed_everything`, `sort_edge_index` (the validation's and test's
  order of the held-out edges), the HeteroData of the splits, `transforms.Compose`, and the graph layers models.py
  imports (unused by MF). This is the more faithful choice: it replaces one name rather than four (prism_loop.py
  also stands in for seed_everything, sort_edge_index and the split objects, and stubs the rest), and what it does
  not replace is the code train.py imports. It is 2.8.1, not the pinned 2.4.0, but the two functions train.py
  calls do the same in both (seed_everything seeds random, numpy, torch and CUDA; sort_edge_index sorts by user,
  then item: 2.4.0 by the one key user x N + item, 2.8.1 by lexsort, the same order on distinct pairs), and the
  two routes gave the same figures on a tiny split. `--stand-ins` takes prism_loop.py's stand-ins for all of
  torch_geometric instead (its Split with recx's node counts), for a machine without the package.
- Stubs of modules imported but not called on this path, only where they are not installed: scikit-learn
  (evaluation_metrics.py imports `ndcg_score`, unused) and matplotlib (dataloader.py and test.py import pyplot).
Observed, not changed: `evaluation_metrics.compute_ndcg_at_k` is wrapped while test.py runs to keep the top-20
lists it is given (test.py's own ranking of every user: dot product, train and validation items masked); they are
written in the dataset's original ids and `recx eval --lists` scores them over all test users with recx's metrics.

Smoke-test caps (off the protocol; result.json's `protocol` is false when one is set): `--epochs N`,
`--batch-size` (train.py's --batch_size) and `--max-batches N` (the loader stand-in yields only the first N batches
of each epoch). The protocol's step does not fit a small CPU machine: MAWULoss.uniformity_dot takes
`F.cosine_similarity(x[:, :, None], x.t()[None, :, :])`, which materialises n x 64 x n tensors for the n distinct
users, and again items, of a batch, both held until the backward pass. At batch 4096 a batch of this split holds
3,504 users and 3,567 items on average; the official loss's forward and backward measured (one thread, float32,
2 busy cores) 12.5 s and 1.9 GB at batch 1024 (975 and 981 distinct), 34.9 s and 7.1 GB at batch 2048 (1,888 and
1,887), so about 24 GB and 2-4 minutes a step at 4096 (201 steps an epoch: 7-13 hours an epoch). The run needs a
GPU, or a CPU machine of 32 GB or more and a great deal of time. Memory besides: each validation (two an epoch, dot
product and cosine) and test.py fill a dense users x items float32 score matrix (4.9 GB on 29,858 x 40,988), and
train.py keeps a copy of the model after every epoch until the end (18 MB each), then writes them all to the
scratch folder.

FOLDER gets `official.log` (train.py's and test.py's output), `official.params` (train.py's record: per-epoch loss,
validation NDCG@20 dot/cosine, seconds), `lists.parquet` (the official top-20 of every user), `eval/` (recx's
evaluation) and `result.json` (the commit, arguments, per-epoch figures, the best epoch, the official test NDCG@20,
recx's NDCG@20 and Recall@20, seconds per epoch).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import itertools
import json
import os
import re
import resource
import runpy
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from checkout import checkout
from prism import _StubFinder
from prism_loop import ACTION, ITEM, USER, LinkNeighborLoader, Split, install_stubs

TRAIN = (
    "--model MLP --dataset MovieLens1M --epochs {epochs} --lr 0.001 --seed {seed} --loss MAWU --hidden_dim 64 "
    "--num_layers 0 --weight_decay 0.0 --batch_size {batch_size} --neg_ratio 0 --reg_types -1 --gamma_vals 2.6,1.4 "
    "--patience 10 --degree_init True --overwrite True --degree_init_str 1.0 --model_save_path {save}"
)
TEST = "--dataset MovieLens1M --model MLP --seed {seed} --loss MAWU --hidden_dim 64 --reg_types -1 --model_save_path {save}"
BATCH_SIZE, EPOCHS, K = 4096, 1000, 20
TEST_LINE = re.compile(
    r"Dot NDCG@(\d+): ([0-9.e-]+), Popular: ([0-9.e-]+), Neutral: ([0-9.e-]+), Unpopular: ([0-9.e-]+)"
)


def read_split(folder: Path, seed: int) -> tuple[int, int, dict[str, torch.Tensor]]:
    """(users, items, {train, val, test: [2, E] edges in recx's contiguous indices}); the training edges in one
    random order drawn from a generator of their own."""
    n_users = len(pd.read_parquet(folder / "users.parquet"))
    n_items = len(pd.read_parquet(folder / "items.parquet"))
    edges = {}
    for name, file in (("train", "train"), ("val", "valid"), ("test", "test")):
        table = pd.read_parquet(folder / f"{file}.parquet", columns=["user", "item"])
        edges[name] = torch.tensor(np.stack([table["user"].to_numpy(), table["item"].to_numpy()]), dtype=torch.long)
    order = torch.randperm(edges["train"].shape[1], generator=torch.Generator().manual_seed(seed))
    edges["train"] = edges["train"][:, order]
    return n_users, n_items, edges


def hetero_split(n_users: int, n_items: int, train: torch.Tensor, edges: torch.Tensor):
    """A split as RandomLinkSplit (key "link") leaves it: real HeteroData."""
    from torch_geometric.data import HeteroData

    data = HeteroData()
    for node, count in ((USER, n_users), (ITEM, n_items)):
        data[node].num_nodes = count
        data[node].x = torch.Tensor([])
    data[USER, ACTION, ITEM].edge_index = train
    data[ITEM, "rated_by", USER].edge_index = train.flip(0)
    data[USER, ACTION, ITEM].link = torch.ones(edges.shape[1])
    data[USER, ACTION, ITEM].link_index = edges
    return data


def stand_in_split(n_users: int, n_items: int, train: torch.Tensor, edges: torch.Tensor) -> Split:
    """prism_loop.py's split stand-in with this dataset's node counts."""
    split = Split([[], []])  # its edges and node counts are then set
    split[USER]["num_nodes"], split[ITEM]["num_nodes"] = n_users, n_items
    split[(USER, ACTION, ITEM)]["link_index"] = edges
    return split


class FirstBatches(LinkNeighborLoader):
    """The loader stand-in yielding only its first `limit` batches each epoch (a smoke-test cap)."""

    limit: int | None = None

    def __iter__(self):
        return itertools.islice(super().__iter__(), self.limit)

    def __len__(self):
        return min(super().__len__(), self.limit)


def install(pyg: Path | None, max_batches: int | None) -> str:
    """Make train.py's imports resolve; returns what torch_geometric is."""
    if pyg is None:
        install_stubs()
        what = "stand-ins (bench/official/prism_loop.py)"
    else:
        if not (pyg / "torch_geometric").is_dir():
            raise SystemExit(f"no torch_geometric under {pyg} (or pass --stand-ins)")
        sys.path.append(str(pyg))
        import torch_geometric

        missing = [name for name in ("sklearn", "matplotlib") if importlib.util.find_spec(name) is None]
        if missing:
            sys.meta_path.insert(0, _StubFinder(missing))

        what = f"torch_geometric {torch_geometric.__version__} ({pyg}), LinkNeighborLoader stood in"
    import torch_geometric.loader

    if max_batches is not None:
        FirstBatches.limit = max_batches
        torch_geometric.loader.LinkNeighborLoader = FirstBatches
    else:
        torch_geometric.loader.LinkNeighborLoader = LinkNeighborLoader
    return what


class Tee(io.TextIOBase):
    """The official output to the log and the terminal; the time each line ended."""

    def __init__(self, log, terminal):
        self.log, self.terminal, self.pending, self.lines = log, terminal, "", []

    def write(self, text: str) -> int:
        self.log.write(text)
        self.terminal.write(text)
        self.pending += text
        *complete, self.pending = self.pending.split("\n")
        now = time.perf_counter()
        self.lines.extend((now, line) for line in complete)
        return len(text)

    def flush(self) -> None:
        self.log.flush()
        self.terminal.flush()


def run_script(path: Path, argv: list[str]) -> None:
    saved, sys.argv = sys.argv, [str(path), *argv]
    try:
        runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.argv = saved


def epoch_records(params: dict, lines: list[tuple[float, str]]) -> list[dict]:
    """Per epoch: train.py's loss, validation NDCG@20 (dot, cosine) and training seconds (its `times`), and the
    seconds from its loss line to its validation line (the validation)."""
    printed = {}
    for when, line in lines:
        found = re.match(r"Epoch: (\d+), (Loss|Val NDCG)", line)
        if found:
            printed.setdefault(int(found.group(1)), {})[found.group(2)] = when
    records = []
    for epoch, (loss, (dot, cosine), seconds) in enumerate(
        zip(params["train_loss"], params["val_ndcg"], params["times"], strict=True)
    ):
        stamps = printed.get(epoch, {})
        validation = stamps["Val NDCG"] - stamps["Loss"] if len(stamps) == 2 else None
        records.append(
            {
                "epoch": epoch,
                "loss": loss,
                "val_ndcg@20_dot": dot,
                "val_ndcg@20_cosine": cosine,
                "train_seconds": seconds,
                "validation_seconds": validation,
            }
        )
    return records


def write_lists(top: torch.Tensor, folder: Path, path: Path) -> None:
    user_ids = pd.read_parquet(folder / "users.parquet")["id"].to_numpy()
    item_ids = pd.read_parquet(folder / "items.parquet")["id"].to_numpy()
    k = top.shape[1]
    pd.DataFrame(
        {
            "user": np.repeat(user_ids, k),
            "item": item_ids[top.numpy().reshape(-1)],
            "rank": np.tile(np.arange(1, k + 1), len(user_ids)),
        }
    ).to_parquet(path, index=False)


def recx_eval(lists: Path, data: Path, out: Path) -> dict:
    command = [sys.executable, "-m", "recx", "eval", "--lists", str(lists), "--dataset", data.name]
    command += ["--data-root", str(data.parent), "--ks", str(K), "--name", "official-prism-mawu", "--out", str(out)]
    subprocess.run(command + ["--quiet", "--force"], check=True)
    rows = pd.read_parquet(out / "results.parquet").query("stratum == 'all'")
    return {f"{row.metric}@{row.k}": float(row.value) for row in rows.itertuples()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="checkout or bare mirror of snap-research/PRISM")
    parser.add_argument("--data", type=Path, required=True, help="a recx-prepared train/valid/test dataset folder")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=EPOCHS, help="train.py --epochs (a cap for smoke tests)")
    parser.add_argument("--seed", type=int, default=123, help="train.py --seed (run_train_prism.sh's first: 123)")
    parser.add_argument("--pyg", type=Path, default=Path("/work/pyg"), help="folder holding torch_geometric")
    parser.add_argument("--stand-ins", action="store_true", help="prism_loop.py's stand-ins for torch_geometric")
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE, help="smoke tests only (protocol: 4096)")
    parser.add_argument("--max-batches", type=int, help="smoke tests only: train the first N batches of an epoch")
    args = parser.parse_args()
    protocol = args.epochs == EPOCHS and args.batch_size == BATCH_SIZE and args.max_batches is None
    args.out.mkdir(parents=True, exist_ok=True)
    what = install(None if args.stand_ins else args.pyg, args.max_batches)
    n_users, n_items, edges = read_split(args.data, args.seed)
    make = stand_in_split if args.stand_ins else hetero_split
    splits = {name: make(n_users, n_items, edges["train"], edges[name]) for name in ("train", "val", "test")}
    files = {f"{name}_{args.seed}.pt": split for name, split in splits.items()}
    real_load = torch.load

    def load(path, *more, **options):
        name = Path(str(path)).name
        return files[name] if name in files else real_load(path, *more, **options)

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch, open(args.out / "official.log", "w") as log:
        root, commit = checkout(args.repo, Path(scratch), "train.py")
        sys.path.insert(0, str(root))
        work = Path(scratch) / "run"
        work.mkdir()
        save = work / "model_chkps"
        train_argv = TRAIN.format(epochs=args.epochs, seed=args.seed, batch_size=args.batch_size, save=save)
        test_argv = TEST.format(seed=args.seed, save=save)
        tee = Tee(log, sys.stdout)
        cwd, torch.load = os.getcwd(), load
        os.chdir(work)
        try:
            with contextlib.redirect_stdout(tee):
                run_script(root / "train.py", shlex.split(train_argv))
                trained = time.perf_counter()
                import evaluation_metrics

                ranked = []
                official_ndcg = evaluation_metrics.compute_ndcg_at_k

                def keeping(top_k_recs, edge_index):
                    ranked.append(top_k_recs)
                    return official_ndcg(top_k_recs, edge_index)

                evaluation_metrics.compute_ndcg_at_k = keeping
                try:
                    run_script(root / "test.py", shlex.split(test_argv))
                finally:
                    evaluation_metrics.compute_ndcg_at_k = official_ndcg
                tested = time.perf_counter()
        finally:
            os.chdir(cwd)
            torch.load = real_load
        (params_file,) = save.rglob("*.params")
        shutil.copyfile(params_file, args.out / "official.params")
        params = json.loads(params_file.read_text())
        lines = tee.lines
    (top,) = ranked
    found = [TEST_LINE.search(line) for _, line in lines]
    (test_line,) = [f for f in found if f]
    write_lists(top, args.data, args.out / "lists.parquet")
    metrics = recx_eval(args.out / "lists.parquet", args.data, args.out / "eval")
    epochs = epoch_records(params, lines)
    validation = [e["validation_seconds"] for e in epochs if e["validation_seconds"] is not None]
    document = {
        "repository": "snap-research/PRISM",
        "commit": commit,
        "command": shlex.join(["python3", "bench/official/prism_run.py", *sys.argv[1:]]),
        "train_arguments": train_argv.replace(str(save), "model_chkps"),
        "test_arguments": test_argv.replace(str(save), "model_chkps"),
        "dataset": args.data.name,
        "n_users": n_users,
        "n_items": n_items,
        "edges": {name: int(e.shape[1]) for name, e in edges.items()},
        "seed": args.seed,
        "protocol": protocol,
        "caps": {"epochs": args.epochs, "batch_size": args.batch_size, "max_batches": args.max_batches},
        "torch_geometric": what,
        "epochs": epochs,
        "epochs_run": len(epochs),
        "stopped_by_patience": len(epochs) < args.epochs,
        "best_epoch": params["last_epoch"],
        "best_val_ndcg@20": params["best_val_ndcg"],
        "official_test": {
            "what": f"test.py: NDCG@{test_line.group(1)} of the best model over the test users, train and "
            "validation items masked (compute_ndcg_at_k, whose loop leaves out the last user by id), and on the "
            "popular 5%, neutral 15%, unpopular 80% of items",
            "ndcg@20": float(test_line.group(2)),
            "ndcg@20_popular": float(test_line.group(3)),
            "ndcg@20_neutral": float(test_line.group(4)),
            "ndcg@20_unpopular": float(test_line.group(5)),
            "seconds": tested - trained,
        },
        "recx_eval": metrics,
        "seconds": time.perf_counter() - started,
        "train_seconds_per_epoch_median": float(np.median(params["times"])),
        "validation_seconds_per_epoch_median": float(np.median(validation)) if validation else None,
        "max_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    (args.out / "result.json").write_text(json.dumps(document, indent=2) + "\n")
    summary = {key: document[key] for key in ("epochs_run", "best_epoch", "best_val_ndcg@20", "protocol")}
    print(json.dumps({**summary, "official_test": document["official_test"], "recx": metrics}, indent=2))


if __name__ == "__main__":
    main()
