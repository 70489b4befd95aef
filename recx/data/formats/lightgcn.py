"""LightGCN-style adjacency lists: `train.txt`, `valid.txt` (optional), `test.txt`, one `user item item ...` line per
user. A user on two lines of one file is refused: such a file is not an adjacency list (a folder of `user item 1`
triplets read this way made every `1` an item)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from recx.core.errors import RecxError
from recx.data.formats.registry import FORMATS
from recx.data.raw import RawInteractions

MAX_DIGITS = 18  # every id of at most 18 digits fits in int64


def read_adjacency_lists(path: Path) -> RawInteractions:
    """Each non-blank line is `user item item ...`: non-negative integer ids (at most 18 digits), the first the user,
    each user on one line; any other token, and a user's second line, is refused with its line numbers."""
    tokens: list[bytes] = []
    first: list[int] = []
    numbers: list[int] = []
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
            numbers.append(number)
            tokens.extend(fields)
    values = np.array(tokens, dtype=np.bytes_).astype(np.int64) if tokens else np.zeros(0, np.int64)
    first_in_line = np.zeros(values.size, dtype=bool)
    first_in_line[first] = True
    _check_one_line_per_user(path, values[first_in_line], np.array(numbers, dtype=np.int64))
    owner = values[first_in_line][np.cumsum(first_in_line) - 1]
    keep = ~first_in_line
    return RawInteractions(owner[keep], values[keep])


def _check_one_line_per_user(path: Path, users: np.ndarray, numbers: np.ndarray) -> None:
    """RecxError naming the first line whose user had a line before, and that line."""
    order = np.argsort(users, kind="stable")
    repeated = np.flatnonzero(users[order][1:] == users[order][:-1])
    if repeated.size:
        pick = repeated[np.argmin(order[repeated + 1])]
        earlier, later = order[pick], order[pick + 1]
        raise RecxError(
            f"{path}, lines {numbers[earlier]} and {numbers[later]}: user {users[later]} is on two lines; a "
            "LightGCN file lists each user on one line (user item item ...). For lines of user item [rating "
            "[timestamp]], use --format triplets"
        )


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
