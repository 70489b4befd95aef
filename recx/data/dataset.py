"""A prepared dataset in memory: CSR splits on the run's device and training popularity."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from recx.core.errors import RecxError
from recx.data.csr import CSR
from recx.data.dataset_folder import (
    IDENTITY,
    Interactions,
    changed_files,
    check_card,
    check_content,
    content_hash,
    damaged,
    read_card,
    read_ids,
    read_split,
)


def _csr(inter: Interactions, n_users: int, n_items: int) -> CSR:
    return CSR.from_pairs(
        torch.from_numpy(inter.user.astype("int64")), torch.from_numpy(inter.item.astype("int64")), n_users, n_items
    )


@dataclass
class Dataset:
    name: str
    n_users: int
    n_items: int
    train: CSR
    valid: CSR | None
    test: CSR
    card: dict
    data_hash: str  # the content's identity (dataset_folder.content_hash, IDENTITY)
    folder: Path
    file_hash: str = ""  # the split files' bytes: the data hash of runs written before IDENTITY

    def holds_data_of(self, recorded_hash: str, identity: str | None, recorded_card: dict | None) -> bool:
        """Whether this is the data a run recorded (environment.json's `data_hash`, `data_identity` and
        `dataset_card`). A run written before recx hashed the content recorded the hash of the split files' bytes:
        it matches when the files are those very bytes, or when the card it recorded (source files and their sha256,
        preparation parameters, counts) is this one's apart from the file checksums and recx version, since the same
        source and parameters give the same data (only the bytes another pyarrow writes differ)."""
        if identity == IDENTITY:
            return recorded_hash == self.data_hash
        if recorded_hash == self.file_hash:
            return True
        volatile = {"files", "recx_version"}
        return bool(recorded_card) and all(
            key in volatile or self.card.get(key) == value for key, value in (recorded_card or {}).items()
        )

    @property
    def item_popularity(self) -> torch.Tensor:
        """Training interaction count per item."""
        return self.train.column_counts()

    def split(self, name: str) -> CSR:
        csr = {"train": self.train, "valid": self.valid, "test": self.test}.get(name)
        if csr is None:
            raise RecxError(f"dataset {self.name!r} has no {name!r} split")
        return csr

    def to(self, device: torch.device) -> "Dataset":
        move = lambda c: None if c is None else c.to(device)  # noqa: E731
        return Dataset(
            self.name,
            self.n_users,
            self.n_items,
            self.train.to(device),
            move(self.valid),
            self.test.to(device),
            self.card,
            self.data_hash,
            self.folder,
            self.file_hash,
        )


def load_dataset(root: Path, name: str) -> Dataset:
    """The prepared dataset `name` under `root`, checked: split files against card.json's checksums (files written
    again with the same content are accepted with a note: dataset_folder.check_content), the card against the data."""
    folder = Path(root) / name
    if not folder.is_dir():
        raise RecxError(f"no prepared dataset {name!r} under {root} (run `recx prepare {name} ...` first)")
    card = read_card(folder)
    changed, file_hash = changed_files(folder, card)
    try:
        train, valid, test = (read_split(folder, s) for s in ("train", "valid", "test"))
        if train is None or test is None:
            raise RecxError(f"{folder} lacks train.parquet or test.parquet")
        splits = {"train": train, "valid": valid, "test": test}
        user_ids, item_ids = read_ids(folder, "users"), read_ids(folder, "items")
        n_users, n_items = check_card(folder, card, splits, user_ids, item_ids)
    except RecxError:
        if changed:  # bytes that differ from the card's and cannot be read as its data: damage
            raise damaged(changed[0]) from None
        raise
    data_hash = content_hash(splits, user_ids, item_ids)
    check_content(folder, card, changed, data_hash)
    return Dataset(
        name,
        n_users,
        n_items,
        _csr(train, n_users, n_items),
        None if valid is None else _csr(valid, n_users, n_items),
        _csr(test, n_users, n_items),
        card,
        data_hash,
        folder.resolve(),
        file_hash,
    )
