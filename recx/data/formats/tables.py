"""From a parsed table to RawInteractions: ids as numbers or vocabulary codes, ratings and timestamps as numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from recx.core.errors import RecxError
from recx.data.ids import encode_strings
from recx.data.raw import RawInteractions


def id_column(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray | None]:
    """Integer ids as they are; string ids as (codes, sorted vocabulary)."""
    if pa.types.is_integer(column.type):
        return column.to_numpy(), None
    return encode_strings(column)


def seconds(column: pa.ChunkedArray) -> np.ndarray:
    """Unix seconds from an integer, date or timestamp column."""
    if pa.types.is_timestamp(column.type):
        return pc.cast(column, pa.timestamp("s", tz=column.type.tz)).cast(pa.int64()).to_numpy()
    if pa.types.is_date(column.type):
        return pc.cast(column, pa.date32()).cast(pa.int32()).to_numpy().astype(np.int64) * 86400
    return column.to_numpy().astype(np.int64, copy=False)


def to_raw(table: pa.Table, user: str, item: str, rating: str | None, timestamp: str | None) -> RawInteractions:
    users, user_vocab = id_column(table.column(user))
    items, item_vocab = id_column(table.column(item))
    ratings = None if rating is None else table.column(rating).to_numpy().astype(np.float32, copy=False)
    times = None if timestamp is None else seconds(table.column(timestamp))
    return RawInteractions(users, items, ratings, times, user_vocab, item_vocab)


def single_file(source: Path, names: tuple[str, ...], fmt: str) -> Path:
    """The source itself, or the one file under a source folder whose name is one of `names`."""
    if source.is_file():
        return source
    found = sorted(p for name in names for p in source.rglob(name) if p.is_file())
    if len(found) != 1:
        what = "no" if not found else f"{len(found)}"
        raise RecxError(f"{source}: {what} files named {' or '.join(names)} for the {fmt} format; give the file itself")
    return found[0]
