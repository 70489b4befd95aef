"""LightGCN-style adjacency lists: `train.txt`, `valid.txt` (optional), `test.txt`, one `user item item ...` line each."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from recx.core.errors import RecxError
from recx.data.formats.registry import FORMATS
from recx.data.raw import RawInteractions

MAX_DIGITS = 18  # every id of at most 18 digits fits in int64


def read_adjacency_lists(path: Path) -> RawInteractions:
    """Each non-blank line is `user item item ...`: non-negative integer ids (at most 18 digits), the first the user;
    any other token is refused with its line number."""
    tokens: list[bytes] = []
    first: list[int] = []
    for number, line in enumerate(path.read_bytes().split(b"\n"), start=1):
        fields = line.split()
        bad = next((token for token in fields if not (token.isdigit() and len(token) <= MAX_DIGITS)), None)
        if bad is not None:
            raise RecxError(
                f"{path}, line {number}: expected non-negative integer ids (user item item ...), got "
                f"{bad[:40].decode('utf-8', 'replace')!r}"
            )
        if fields:
            first.append(len(tokens))
            tokens.extend(fields)
    values = np.array(tokens, dtype=np.bytes_).astype(np.int64) if tokens else np.zeros(0, np.int64)
    first_in_line = np.zeros(values.size, dtype=bool)
    first_in_line[first] = True
    owner = values[first_in_line][np.cumsum(first_in_line) - 1]
    keep = ~first_in_line
    return RawInteractions(owner[keep], values[keep])


@FORMATS.register("lightgcn")
def read_lightgcn(source: Path, **_) -> dict[str, RawInteractions]:
    """A folder with train/valid/test adjacency lists; the split is kept as given."""
    if not source.is_dir():
        raise RecxError(f"{source}: the lightgcn format expects a folder with train.txt and test.txt")
    splits = {}
    for split in ("train", "valid", "test"):
        path = source / f"{split}.txt"
        if path.is_file():
            splits[split] = read_adjacency_lists(path)
        elif split != "valid":
            raise RecxError(f"{source}: missing {split}.txt")
    return splits
