"""Text files of `user item [rating [timestamp]]` per line, separated by whitespace, commas or tabs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from recx.data.formats import FORMATS
from recx.data.raw import RawInteractions
from recx.errors import RecxError


def _separator(first_line: str) -> str:
    if "," in first_line:
        return ","
    if "\t" in first_line:
        return "\t"
    return r"\s+"


def _first_bad_line(frame: pd.DataFrame, column: str) -> int:
    bad = pd.to_numeric(frame[column], errors="coerce").isna() & frame[column].notna()
    missing = frame[column].isna()
    return int(np.flatnonzero((bad | missing).to_numpy())[0])


@FORMATS.register("triplets")
def read_triplets(source: Path, **_) -> RawInteractions:
    """Parsed by pandas' C engine; the first malformed line is named in the error."""
    if not source.is_file():
        raise RecxError(f"{source}: no such file")
    with open(source, "r", errors="replace") as handle:
        first = next((line for line in handle if line.strip()), "")
    if not first:
        raise RecxError(f"{source}: the file is empty")
    try:
        frame = pd.read_csv(source, sep=_separator(first), header=None, dtype=str, engine="c",
                            skip_blank_lines=True, names=range(4), comment=None)
    except pd.errors.ParserError as exc:
        raise RecxError(f"{source}: {exc}") from None
    columns = {}
    for index, name in enumerate(("user", "item", "rating", "timestamp")):
        values = frame[index]
        if values.isna().all() and index >= 2:
            columns[name] = None
            continue
        numeric = pd.to_numeric(values, errors="coerce")
        if numeric.isna().any():
            line = _first_bad_line(frame, index) + 1
            raise RecxError(f"{source}, line {line}: expected a number in column {index + 1} ({name}), got {values.iloc[line - 1]!r}")
        columns[name] = numeric.to_numpy()
    return RawInteractions(
        columns["user"].astype(np.int64), columns["item"].astype(np.int64),
        None if columns["rating"] is None else columns["rating"].astype(np.float32),
        None if columns["timestamp"] is None else columns["timestamp"].astype(np.int64),
    )
