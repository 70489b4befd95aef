"""Top-K lists written by any system, evaluated by recx's protocol: the same metrics, popularity strata and per-user
files as a recx run, in a run-like folder that `recx report` puts beside recx's runs with the same paired tests.

The lists: Parquet, or text with a header row (tab-separated, or comma-separated for `.csv`), with columns `user`,
`item` and `rank` (1 first) or `score` (highest first; equal scores keep the file's order), in the dataset's
original ids (its users.parquet and items.parquet; recx's own `--dump-topk` writes them). Each user's list is cut at
K = max(ks). Refused, with a count and examples: users or items the dataset does not have, an item listed twice for
one user, a rank that is not a positive integer, a score that is not a finite number. Noted, with a count: evaluated
users without a list and lists shorter than K (the missing places are misses), listed items the user trained on
(recx ranks without them; here they are misses), lists of users without a held-out item (not evaluated).

The folder (`runs/<id>` by default, the id a hash of the lists, the data and the split): `lists.json` (the source
file and its sha256, the dataset and its data hash, the split, the cut-offs, the counts above), `results.parquet`
(recx's long format with `method` the lists' name), `per_user_<split>.parquet`, checksums and `COMPLETE`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from recx.core.errors import RecxError
from recx.core.folders import write_text_atomic
from recx.data.dataset import Dataset
from recx.data.dataset_folder import IDENTITY, read_ids, sha256_of
from recx.eval.evaluator import excluded_splits, score_lists
from recx.runs import store
from recx.runs.per_user import write_lists, write_per_user

EXAMPLES = 3


@dataclass
class ListsOutcome:
    folder: Path
    results: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def read_lists(path: Path) -> pd.DataFrame:
    """The lists file as a frame with string `user` and `item` and a numeric `rank` or `score`."""
    if not path.is_file():
        raise RecxError(f"{path}: no such lists file")
    try:
        if path.suffix == ".parquet":
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_csv(path, sep="," if path.suffix == ".csv" else "\t", dtype={"user": str, "item": str})
    except Exception as error:  # pandas and pyarrow raise several types for a file they cannot parse
        raise RecxError(f"{path}: not a readable lists file ({type(error).__name__}: {error})") from None
    missing = [column for column in ("user", "item") if column not in frame.columns]
    if missing or not {"rank", "score"} & set(frame.columns):
        raise RecxError(
            f"{path}: expected columns user, item and rank or score (found {', '.join(map(str, frame.columns))})"
        )
    return frame.assign(user=frame["user"].astype(str), item=frame["item"].astype(str))


def _examples(values) -> str:
    shown = ", ".join(repr(value) for value in list(dict.fromkeys(values))[:EXAMPLES])
    return f"e.g. {shown}"


def _codes(frame: pd.DataFrame, column: str, ids, path: Path, dataset: Dataset) -> np.ndarray:
    """Each row's contiguous id for its original `column` id; unknown ids are refused."""
    if ids is None:
        raise RecxError(f"{dataset.folder}: no {column}s.parquet (the original ids); prepare the dataset again")
    codes = pd.Index(ids.to_pylist()).get_indexer(frame[column])
    unknown = frame[column][codes < 0]
    if len(unknown):
        raise RecxError(
            f"{path}: {unknown.nunique():,} {column}s ({len(unknown):,} rows) are not {column}s of dataset "
            f"{dataset.name!r} ({_examples(unknown)}); the lists must use the dataset's original ids "
            f"({column}s.parquet)"
        )
    return codes


def _order(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Rows sorted by user, then rank (or descending score), with each row's place in its user's list."""
    if "rank" in frame.columns:
        rank = pd.to_numeric(frame["rank"], errors="coerce")
        bad = frame["rank"][~(rank.notna() & (rank >= 1) & (rank == rank.round()))]
        if len(bad):
            raise RecxError(f"{path}: {len(bad):,} ranks are not positive integers ({_examples(bad)})")
        frame = frame.assign(key=rank.to_numpy())
    else:
        score = pd.to_numeric(frame["score"], errors="coerce")
        bad = frame["score"][~np.isfinite(score.to_numpy(dtype=float, na_value=np.nan))]
        if len(bad):
            raise RecxError(f"{path}: {len(bad):,} scores are not finite numbers ({_examples(bad)})")
        frame = frame.assign(key=-score.to_numpy(dtype=float))
    frame = frame.sort_values(["user_code", "key"], kind="stable")
    repeated = frame.duplicated(["user_code", "item_code"])
    if repeated.any():
        pairs = [f"{u}/{i}" for u, i in zip(frame.user[repeated], frame.item[repeated], strict=True)]
        raise RecxError(f"{path}: {int(repeated.sum()):,} items are listed twice for one user ({_examples(pairs)})")
    return frame.assign(place=frame.groupby("user_code", sort=False).cumcount().to_numpy())


def ranked_items(path: Path, dataset: Dataset, users: torch.Tensor, k: int) -> tuple[torch.Tensor, list[str]]:
    """(items [len(users), k]: each user's listed items in rank order, -1 where the list ends or is missing;
    notes on what was counted but not refused)."""
    frame = read_lists(path)
    frame = frame.assign(
        user_code=_codes(frame, "user", read_ids(dataset.folder, "users"), path, dataset),
        item_code=_codes(frame, "item", read_ids(dataset.folder, "items"), path, dataset),
    )
    frame = _order(frame, path)
    row_of = np.full(dataset.n_users, -1, dtype=np.int64)
    row_of[users.cpu().numpy()] = np.arange(users.numel())
    rows = row_of[frame.user_code.to_numpy()]
    evaluated = rows >= 0
    notes = []
    ignored = frame.user_code[~evaluated].nunique()
    if ignored:
        notes.append(f"{ignored:,} listed users have no held-out item in the split (not evaluated)")
    lengths = np.bincount(rows[evaluated], minlength=users.numel())
    if (lengths == 0).any():
        notes.append(f"{int((lengths == 0).sum()):,} evaluated users have no list (all misses)")
    short = int(((lengths > 0) & (lengths < k)).sum())
    if short:
        notes.append(f"{short:,} lists are shorter than K={k} (the missing places are misses)")
    keep = evaluated & (frame.place.to_numpy() < k)
    items = torch.full((users.numel(), k), -1, dtype=torch.long)
    items[torch.from_numpy(rows[keep]), torch.from_numpy(frame.place.to_numpy()[keep])] = torch.from_numpy(
        frame.item_code.to_numpy()[keep].astype(np.int64)
    )
    return items, notes


def _seen(dataset: Dataset, split: str, users: torch.Tensor, items: torch.Tensor) -> int:
    listed = items >= 0
    rows = users[:, None].expand_as(items)
    seen = torch.zeros_like(listed)
    for csr in excluded_splits(dataset, split):
        seen |= csr.contains(rows, items.clamp_min(0)) & listed
    return int(seen.sum())


def lists_evaluation(
    path: Path, dataset: Dataset, split: str, ks: list[int], folder: Path | None, name: str | None
) -> ListsOutcome:
    """Evaluate the lists in `path` on `dataset`'s `split` at cut-offs `ks` into `folder` (default runs/<id>)."""
    target = dataset.split(split)
    if max(ks) > dataset.n_items:
        raise RecxError(f"K={max(ks)} is larger than the number of items ({dataset.n_items})")
    users = torch.nonzero(target.row_lengths() > 0).flatten()
    if users.numel() == 0:
        raise RecxError(f"no user has a {split} item")
    items, notes = ranked_items(path, dataset, users, max(ks))
    seen = _seen(dataset, split, users, items)
    if seen:
        notes.append(f"{seen:,} listed items are items their user trained on (recx ranks without them; misses here)")
    evaluation = score_lists(dataset, split, users, items, ks)
    digest = sha256_of(path)
    run_id = hashlib.sha256(f"{digest} {dataset.data_hash} {split} {ks}".encode()).hexdigest()[:12]
    label = name or path.stem
    folder = folder if folder is not None else Path("runs") / run_id
    results = lists_results(run_id, label, dataset.name, split, evaluation.values)
    if (folder / "config.yaml").exists() or store.state(folder) not in ("absent", "empty", "complete"):
        raise RecxError(f"{folder} holds files recx did not write for lists; choose another --run-dir")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RecxError(f"{folder}: cannot create the folder ({exc.strerror or exc})") from None
    record = {
        "name": label,
        "source": str(path.resolve()),
        "sha256": digest,
        "dataset": dataset.name,
        "data_folder": str(dataset.folder),
        "data_hash": dataset.data_hash,
        "data_identity": IDENTITY,
        "split": split,
        "ks": ks,
        "users": users.numel(),
        "notes": notes,
    }
    write_text_atomic(folder / store.LISTS_FILE, json.dumps(record, indent=2) + "\n", "nothing else was written")
    write_per_user(folder, split, evaluation)
    write_lists(folder, split, evaluation)
    store.write_results(folder, results)
    store.mark_complete(folder)
    return ListsOutcome(folder, results, notes)


def lists_results(run_id: str, name: str, dataset: str, split: str, values: dict) -> pd.DataFrame:
    """recx's long results format, with `method` the lists' name (model `lists`, no loss or sampler)."""
    rows = [
        {
            "run_id": run_id,
            "dataset": dataset,
            "model": "lists",
            "loss": name,
            "sampler": "",
            "seed": 0,
            "split": split,
            "metric": metric,
            "k": k,
            "stratum": stratum,
            "value": value,
        }
        for (metric, k, stratum), value in sorted(values.items())
    ]
    return pd.DataFrame(rows, columns=store.RESULT_COLUMNS).assign(method=name)
