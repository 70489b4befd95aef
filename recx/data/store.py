"""Prepared datasets on disk (docs/design.md "Data on disk"): Parquet splits, id maps and card.json, written atomically."""
from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from recx import __version__
from recx.errors import RecxError
from recx.data.root import default_data_root  # noqa: F401 (recx.data.store.default_data_root, as before)
from recx.folders import clean_stale, swap_in, temp_sibling, writable_folder
from recx.names import check_name

SPLITS = ("train", "valid", "test")


def sha256_of(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class Interactions:
    """One split as parallel arrays of contiguous ids (and ratings/timestamps when the source has them)."""

    user: np.ndarray
    item: np.ndarray
    rating: np.ndarray | None = None
    timestamp: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.user.shape[0])

    def take(self, index: np.ndarray) -> "Interactions":
        pick = lambda a: None if a is None else a[index]  # noqa: E731
        return Interactions(self.user[index], self.item[index], pick(self.rating), pick(self.timestamp))

    def table(self) -> pa.Table:
        columns = {"user": pa.array(self.user.astype(np.int32, copy=False)),
                   "item": pa.array(self.item.astype(np.int32, copy=False))}
        if self.rating is not None:
            columns["rating"] = pa.array(self.rating.astype(np.float32, copy=False))
        if self.timestamp is not None:
            columns["timestamp"] = pa.array(self.timestamp.astype(np.int64, copy=False))
        return pa.table(columns)


def _write_parquet(table: pa.Table, path: Path) -> None:
    # Fixed writer options and no wall-clock metadata: the same input gives byte-identical files.
    pq.write_table(table, path, compression="zstd", use_dictionary=False, write_statistics=True, store_schema=False)


def check_target(root: Path, name: str, force: bool) -> Path:
    """`<root>/<name>` after checking the name and the root; refuses an existing dataset unless `force`."""
    check_name(name, "dataset name")
    writable_folder(root, "data root")
    final = root / name
    if final.exists() and not (final / "card.json").is_file():
        raise RecxError(f"{final}: a folder (not a prepared dataset) of that name exists; recx does not replace it, "
                        "choose another name")
    if final.exists() and not force:
        raise RecxError(f"{final}: a dataset of that name exists; pass --force to replace it, or choose another name")
    return final


def write_dataset(
    root: Path,
    name: str,
    splits: dict[str, Interactions],
    user_ids: np.ndarray,
    item_ids: np.ndarray,
    card: dict,
    force: bool = False,
) -> Path:
    """Write `<root>/<name>/` under a temporary name, then swap it in: an interrupted write leaves no dataset, and
    with `force` an existing one is replaced whole. The caller holds the dataset's lock."""
    final = check_target(root, name, force)
    clean_stale(final)
    tmp = temp_sibling(final)
    try:
        tmp.mkdir()
        for split, inter in splits.items():
            _write_parquet(inter.table(), tmp / f"{split}.parquet")
        _write_parquet(pa.table({"id": pa.array(np.asarray(user_ids).astype(str))}), tmp / "users.parquet")
        _write_parquet(pa.table({"id": pa.array(np.asarray(item_ids).astype(str))}), tmp / "items.parquet")
        n_users, n_items = len(user_ids), len(item_ids)
        total = sum(len(s) for s in splits.values())
        full_card = {
            "name": name,
            **card,
            "n_users": n_users,
            "n_items": n_items,
            "counts": {split: len(inter) for split, inter in splits.items()},
            "n_interactions": total,
            "sparsity": 1.0 - total / max(n_users * n_items, 1),
            "recx_version": __version__,
        }
        (tmp / "card.json").write_text(json.dumps(full_card, indent=2, sort_keys=True) + "\n")
        swap_in(tmp, final)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RecxError(f"writing dataset {name!r} under {root} failed: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def read_card(folder: Path) -> dict:
    card_path = folder / "card.json"
    if not card_path.is_file():
        raise RecxError(f"{folder} is not a prepared dataset (no card.json); run `recx prepare` first")
    return json.loads(card_path.read_text())


def read_split(folder: Path, split: str) -> Interactions | None:
    path = folder / f"{split}.parquet"
    if not path.is_file():
        return None
    table = pq.read_table(path)
    column = lambda c: table.column(c).to_numpy() if c in table.column_names else None  # noqa: E731
    return Interactions(column("user"), column("item"), column("rating"), column("timestamp"))


def dataset_hash(folder: Path) -> str:
    """sha256 over the split files, in a fixed order: identifies the exact data a run trained on."""
    digest = hashlib.sha256()
    for split in SPLITS:
        path = folder / f"{split}.parquet"
        if path.is_file():
            digest.update(split.encode())
            digest.update(sha256_of(path).encode())
    return digest.hexdigest()
