"""Prepared datasets on disk (docs/design.md "Data on disk"): Parquet splits, id maps and card.json, written atomically.

card.json's `files` maps each Parquet file to its sha256, recorded when the dataset is complete (each file hashed as
its bytes are written, not read back) and checked when a split is read; a dataset prepared by an older recx (no
`files`) is read unchecked, with one note saying so. card.json's `content_hash` is the dataset's identity
(`content_hash`, of its columns' values): a split file whose bytes differ from the recorded sha256 but whose content
still hashes to it (a pipeline re-saved the files with other Parquet options) is accepted with a note, and
`refresh_checksums` records its new bytes; only a change of content is "changed or damaged".
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from recx.core.errors import RecxError
from recx.core.folders import (
    atomic_file,
    clean_stale,
    failure_reason,
    swap_in,
    temp_sibling,
    writable_folder,
    write_text_atomic,
)
from recx.core.names import check_name
from recx.core.versions import RECX_VERSION

SPLITS = ("train", "valid", "test")
OWN_FILES = {f"{split}.parquet" for split in SPLITS} | {"users.parquet", "items.parquet", "card.json"}
REPAIR = "prepare the dataset again with --force"
_NOTED: set[str] = set()


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
        columns = {
            "user": pa.array(self.user.astype(np.int32, copy=False)),
            "item": pa.array(self.item.astype(np.int32, copy=False)),
        }
        if self.rating is not None:
            columns["rating"] = pa.array(self.rating.astype(np.float32, copy=False))
        if self.timestamp is not None:
            columns["timestamp"] = pa.array(self.timestamp.astype(np.int64, copy=False))
        return pa.table(columns)


class _HashingWriter(io.RawIOBase):
    """A binary file wrapper that feeds every byte written through sha256 (the card's file hash, in the pass that
    writes the file)."""

    def __init__(self, handle):
        super().__init__()
        self.handle, self.digest = handle, hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.digest.update(data)
        return self.handle.write(data)


def _write_parquet(table: pa.Table, path: Path) -> str:
    """Write `table` to `path`; returns the sha256 of the bytes written. Fixed writer options and no wall-clock
    metadata: the same input gives byte-identical files."""
    with atomic_file(path, "the dataset folder being written is removed") as partial, open(partial, "wb") as handle:
        sink = _HashingWriter(handle)
        options = {"compression": "zstd", "use_dictionary": False, "write_statistics": True, "store_schema": False}
        pq.write_table(table, sink, **options)
    return sink.digest.hexdigest()


def is_own_folder(folder: Path) -> bool:
    """A dataset folder recx wrote, even one whose card.json was deleted: only recx's own file names, and a split."""
    names = {entry.name for entry in folder.iterdir()}
    return bool(names) and names <= OWN_FILES and bool(names & {"train.parquet", "test.parquet"})


def check_target(root: Path, name: str, force: bool) -> Path:
    """`<root>/<name>` after checking the name and the root; refuses an existing dataset unless `force`. A folder
    recx recognises as a damaged dataset of its own (its Parquet files, no card.json) may be replaced with `force`."""
    check_name(name, "dataset name")
    writable_folder(root, "data root")
    final = root / name
    if final.exists() and not final.is_dir():
        raise RecxError(f"{final}: a file of that name exists; recx does not replace it, choose another name")
    if final.exists() and not (final / "card.json").is_file():
        if not is_own_folder(final):
            raise RecxError(
                f"{final}: a folder (not a prepared dataset) of that name exists; recx does not replace "
                "it, choose another name"
            )
        if not force:
            raise RecxError(
                f"{final}: a damaged dataset of that name exists (its card.json is missing); pass --force "
                "to replace it, or choose another name"
            )
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
        files = {}
        for split, inter in splits.items():
            files[f"{split}.parquet"] = _write_parquet(inter.table(), tmp / f"{split}.parquet")
        for which, ids in (("users", user_ids), ("items", item_ids)):
            table = pa.table({"id": pa.array(np.asarray(ids).astype(str))})
            files[f"{which}.parquet"] = _write_parquet(table, tmp / f"{which}.parquet")
        n_users, n_items = len(user_ids), len(item_ids)
        total = sum(len(s) for s in splits.values())
        identity = content_hash(
            dict(splits),
            pa.array(np.asarray(user_ids).astype(str)),
            pa.array(np.asarray(item_ids).astype(str)),
        )
        full_card = {
            "name": name,
            **card,
            "n_users": n_users,
            "n_items": n_items,
            "counts": {split: len(inter) for split, inter in splits.items()},
            "n_interactions": total,
            "sparsity": 1.0 - total / max(n_users * n_items, 1),
            "recx_version": RECX_VERSION,
            "files": files,
            "content_hash": identity,
            "identity": IDENTITY,
        }
        write_text_atomic(tmp / "card.json", json.dumps(full_card, indent=2, sort_keys=True) + "\n")
        swap_in(tmp, final)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RecxError(
            f"writing dataset {name!r} under {root} failed: {failure_reason(root, exc)}; nothing was kept"
        ) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def read_card(folder: Path) -> dict:
    card_path = folder / "card.json"
    if not card_path.is_file():
        raise RecxError(
            f"{folder} is not a prepared dataset (no card.json); run `recx prepare` first"
            + (f" ({REPAIR})" if is_own_folder(folder) else "")
        )
    try:
        card = json.loads(card_path.read_text())
    except (OSError, ValueError) as exc:
        raise RecxError(f"{card_path}: unreadable ({type(exc).__name__}); {REPAIR}") from None
    if not isinstance(card, dict):
        raise RecxError(f"{card_path}: expected a JSON object; {REPAIR}")
    return card


def check_card(
    folder: Path,
    card: dict,
    splits: dict[str, Interactions | None],
    user_ids: pa.Array | None,
    item_ids: pa.Array | None,
) -> tuple[int, int]:
    """(n_users, n_items) of card.json once it is checked against the data: each a non-negative integer equal to the
    rows of users.parquet / items.parquet (when present) and above every id of the splits, and `counts` naming exactly
    the split files present with their numbers of rows. A card that says otherwise would train over phantom items
    or fail inside the model; the RecxError names card.json, the key, its value and what the data holds."""
    path = folder / "card.json"

    def refuse(key: str, value, holds: str) -> RecxError:
        return RecxError(f"{path}: {key} = {value!r}, but {holds}; the card does not describe this data ({REPAIR})")

    sizes = {}
    for key, which, ids in (("n_users", "user", user_ids), ("n_items", "item", item_ids)):
        value = card.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise refuse(key, value, "expected a non-negative integer")
        if ids is not None and len(ids) != value:
            raise refuse(key, value, f"{which}s.parquet holds {len(ids):,} {which}s")
        for split, inter in splits.items():
            column = None if inter is None else getattr(inter, which)
            if column is not None and column.size and (int(column.min()) < 0 or int(column.max()) >= value):
                raise refuse(key, value, f"{split}.parquet holds {which} ids {int(column.min())}..{int(column.max())}")
        sizes[key] = value
    counts = card.get("counts")
    present = {split: len(inter) for split, inter in splits.items() if inter is not None}
    if not isinstance(counts, dict) or set(counts) != set(present):
        raise refuse("counts", counts, f"the folder holds {', '.join(f'{s}.parquet' for s in present)}")
    for split, rows in present.items():
        if counts[split] != rows:
            raise refuse(f"counts.{split}", counts[split], f"{split}.parquet holds {rows:,} rows")
    return sizes["n_users"], sizes["n_items"]


def read_split(folder: Path, split: str) -> Interactions | None:
    path = folder / f"{split}.parquet"
    if not path.is_file():
        return None
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise RecxError(f"{path}: truncated or not a Parquet file ({type(exc).__name__}); {REPAIR}") from None
    column = lambda c: table.column(c).to_numpy() if c in table.column_names else None  # noqa: E731
    return Interactions(
        table.column("user").to_numpy(), table.column("item").to_numpy(), column("rating"), column("timestamp")
    )


def damaged(path: Path, why: str = "its sha256 differs from the one in card.json") -> RecxError:
    return RecxError(f"{path}: changed or damaged since recx wrote it ({why}); {REPAIR}")


def changed_files(folder: Path, card: dict | None = None) -> tuple[list[Path], str]:
    """The damage check's first half: (the split files whose bytes differ from the sha256 card.json recorded for
    them, the hash of the split files' bytes). The hash (sha256 over each split's name and file sha256) is the data
    hash of runs written before recx hashed the columns (`IDENTITY`). A changed file is refused at once unless the
    card records the content hash that can tell re-saved bytes from changed data (`check_content`)."""
    recorded = (card or {}).get("files")
    if card is not None and not recorded and str(folder) not in _NOTED:
        _NOTED.add(str(folder))
        print(
            f"note: {folder}/card.json records no checksums (prepared by an older recx): its files are read "
            "without a damage check",
            file=sys.stderr,
        )
    digest, changed = hashlib.sha256(), []
    for split in SPLITS:
        path = folder / f"{split}.parquet"
        if path.is_file():
            actual = sha256_of(path)
            if recorded and recorded.get(path.name) not in (None, actual):
                changed.append(path)
            digest.update(split.encode())
            digest.update(actual.encode())
    if changed and not recorded_content_hash(card):
        raise damaged(changed[0])
    return changed, digest.hexdigest()


def recorded_content_hash(card: dict | None) -> str | None:
    """The content hash card.json records (older cards have none), when it is of this recx's identity."""
    card = card or {}
    value = card.get("content_hash")
    return value if isinstance(value, str) and card.get("identity") == IDENTITY else None


def check_content(folder: Path, card: dict, changed: list[Path], data_hash: str) -> None:
    """The damage check's second half, for split files whose bytes changed: the content must still hash to the
    card's `content_hash`; then they are accepted with one note (the bytes were re-saved), else refused."""
    if not changed:
        return
    if data_hash != recorded_content_hash(card):
        raise damaged(changed[0], "its sha256 and the dataset's content hash differ from those in card.json")
    if str(folder) not in _NOTED:
        _NOTED.add(str(folder))
        names = ", ".join(path.name for path in changed)
        print(
            f"note: {folder}: {names} {'was' if len(changed) == 1 else 'were'} written again since recx prepared "
            "the dataset (other bytes, e.g. another Parquet compression) with the same content (the content hash "
            f"card.json records): accepted; `recx prepare {folder.name} --data-root {folder.parent} "
            "--refresh-checksums` records the new files' checksums",
            file=sys.stderr,
        )


def refresh_checksums(folder: Path) -> list[str]:
    """Record the current bytes' sha256 of the dataset's Parquet files in card.json, after checking that their
    content is the one the card records; returns the names whose checksum changed. The caller holds the dataset's
    lock and has loaded it (so the content was checked: `check_content`)."""
    card = read_card(folder)
    files = card.get("files")
    if not isinstance(files, dict):
        raise RecxError(f"{folder / 'card.json'}: records no checksums to refresh; {REPAIR}")
    changed = []
    for name in sorted(files):
        path = folder / name
        if path.is_file() and files[name] != (actual := sha256_of(path)):
            files[name] = actual
            changed.append(name)
    if changed:
        write_text_atomic(folder / "card.json", json.dumps(card, indent=2, sort_keys=True) + "\n")
    return changed


def read_ids(folder: Path, which: str) -> pa.Array | None:
    """The original ids of `which` ("users" or "items"), one string per contiguous id; None when the file is absent."""
    path = folder / f"{which}.parquet"
    if not path.is_file():
        return None
    try:
        return pq.read_table(path).column("id").combine_chunks()
    except (OSError, KeyError, pa.ArrowException) as exc:
        raise RecxError(f"{path}: truncated or not an id map ({type(exc).__name__}); {REPAIR}") from None


# What a run's data hash is a hash of: environment.json records it beside the hash. Runs written before it record
# no identity: their hash is `check_files`'s, of the Parquet bytes, which another pyarrow writes differently.
IDENTITY = "columns-v1"
# Each column's canonical little-endian type (the types design.md's "Data on disk" fixes).
CANONICAL = {"user": "<i4", "item": "<i4", "rating": "<f4", "timestamp": "<i8"}


def _update_strings(digest, name: str, ids: pa.Array | None) -> None:
    if ids is None:
        digest.update(f"{name}:absent\n".encode())
        return
    ids = ids.cast(pa.large_string())
    offsets = np.frombuffer(ids.buffers()[1], dtype="<i8", count=len(ids) + 1, offset=ids.offset * 8)
    data = ids.buffers()[2]
    digest.update(f"{name}:{len(ids)}\n".encode())
    digest.update((offsets - offsets[0]).astype("<i8").tobytes())
    digest.update(memoryview(data)[offsets[0] : offsets[-1]] if data is not None else b"")


def content_hash(splits: dict[str, Interactions | None], user_ids: pa.Array | None, item_ids: pa.Array | None) -> str:
    """The dataset's identity: sha256 of its content in a canonical encoding, not of its files' bytes, so another
    pyarrow or a re-prepare of the same source gives the same hash. For each split present, in SPLITS order: its
    name and length, then each column it has in CANONICAL's order as its name and its values in the canonical type;
    then the original ids of users and items (lengths and UTF-8 bytes)."""
    digest = hashlib.sha256(f"recx data {IDENTITY}\n".encode())
    for split in SPLITS:
        inter = splits.get(split)
        if inter is None:
            continue
        digest.update(f"{split}:{len(inter)}\n".encode())
        for column, canonical in CANONICAL.items():
            values = getattr(inter, column)
            if values is not None:
                digest.update(f"{column}:{canonical}\n".encode())
                digest.update(np.ascontiguousarray(values, dtype=canonical).data)
    _update_strings(digest, "users", user_ids)
    _update_strings(digest, "items", item_ids)
    return digest.hexdigest()
