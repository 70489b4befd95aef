"""A prepared dataset in memory: CSR splits on the run's device and training popularity."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from recx.core.errors import RecxError
from recx.data.csr import CSR
from recx.data.dataset_folder import Interactions, dataset_hash, read_card, read_split


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
    data_hash: str
    folder: Path

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
        )


def load_dataset(root: Path, name: str) -> Dataset:
    folder = Path(root) / name
    if not folder.is_dir():
        raise RecxError(f"no prepared dataset {name!r} under {root} (run `recx prepare {name} ...` first)")
    card = read_card(folder)
    n_users, n_items = int(card["n_users"]), int(card["n_items"])
    data_hash = dataset_hash(folder, card)
    train, valid, test = (read_split(folder, s) for s in ("train", "valid", "test"))
    if train is None or test is None:
        raise RecxError(f"{folder} lacks train.parquet or test.parquet")
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
    )
