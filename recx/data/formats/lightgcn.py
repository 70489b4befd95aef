"""LightGCN-style adjacency lists: `train.txt`, `valid.txt` (optional), `test.txt`, one `user item item ...` line each."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from recx.data.formats import FORMATS
from recx.data.raw import RawInteractions
from recx.errors import RecxError


def read_adjacency_lists(path: Path) -> RawInteractions:
    """Parse a whole adjacency-list file with array operations: each line's first token is the user."""
    data = np.frombuffer(path.read_bytes().replace(b"\r", b" "), dtype=np.uint8)
    is_space = (data == ord(" ")) | (data == ord("\t")) | (data == ord("\n"))
    starts = np.flatnonzero(~is_space & np.concatenate([[True], is_space[:-1]]))
    line_of_token = np.cumsum(data == ord("\n"))[starts] - (data[starts] == ord("\n"))
    tokens = np.array(bytes(data).split())
    try:
        values = tokens.astype(np.int64)
    except ValueError:
        digit_ok = np.char.isdigit(np.char.decode(tokens, "ascii", "replace"))
        bad = int(np.flatnonzero(~digit_ok)[0])
        raise RecxError(f"{path}, line {int(line_of_token[bad]) + 1}: expected integer ids, got {tokens[bad].decode(errors='replace')!r}")
    first_in_line = np.concatenate([[True], line_of_token[1:] != line_of_token[:-1]])
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
