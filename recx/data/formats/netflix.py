"""Netflix Prize `combined_data_*.txt`: a `MovieID:` line, then that movie's `CustomerID,Rating,Date` lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from recx.core.errors import RecxError
from recx.data.formats.columnar import csv_parser
from recx.data.formats.lines import ReadReport, read_lines_table
from recx.data.formats.registry import FORMATS
from recx.data.raw import RawInteractions

NAMES = ["id", "rating", "date"]
TYPES = {"id": pa.int32(), "rating": pa.int8(), "date": pa.date32()}
EXPECTED = "'MovieID:' or 'CustomerID,Rating,YYYY-MM-DD'"


def _parser():
    """`MovieID:` lines become `MovieID,,` rows: one CSV parse, and a movie row is the one with a null rating."""
    parse = csv_parser(NAMES, TYPES, ",", empty_is_null=True)

    def run(block: bytes) -> pa.Table:
        table = parse(block.replace(b":\n", b",,\n"))
        if pc.any(pc.not_equal(table.column("rating").is_null(), table.column("date").is_null())).as_py() is True:
            raise ValueError("a rating line lacks its rating or date")
        return table

    return run


def _files(source: Path) -> list[Path]:
    if source.is_file():
        return [source]
    files = sorted(p for p in source.iterdir() if p.name.startswith("combined_data_") and p.is_file())
    if not files:
        raise RecxError(f"{source}: no combined_data_*.txt files (the Netflix Prize training data)")
    return files


def _read_file(path: Path, skip_bad_lines: bool, report: ReadReport) -> tuple[np.ndarray, ...]:
    """(customer, movie, rating, day) arrays; each rating row takes the movie of the last movie row above it."""
    table = read_lines_table(path, _parser(), EXPECTED, skip_bad_lines, report)
    is_movie = table.column("rating").is_null().to_numpy(zero_copy_only=False)
    ids = table.column("id").to_numpy()
    movie_rows = np.flatnonzero(is_movie)
    orphans = int(movie_rows[0]) if movie_rows.size else ids.size
    if orphans:
        if not skip_bad_lines:
            raise RecxError(f"{path}: {orphans} rating lines come before the first 'MovieID:' line")
        report.malformed_lines += orphans
    counts = np.diff(np.concatenate([movie_rows, [ids.size]]))
    movie = np.repeat(ids[movie_rows], counts)
    keep = ~is_movie[orphans:]
    rating = table.column("rating").to_numpy(zero_copy_only=False)[orphans:][keep]
    day = table.column("date").cast(pa.int32()).to_numpy(zero_copy_only=False)[orphans:][keep]
    return ids[orphans:][keep], movie[keep], rating.astype(np.int8), day.astype(np.int32)


@FORMATS.register("netflix")
def read_netflix(source: Path, skip_bad_lines: bool = False, report: ReadReport | None = None, **_) -> RawInteractions:
    """All `combined_data_*.txt` files of a folder (or one file); timestamps are the rating dates at 00:00 UTC."""
    report = report if report is not None else ReadReport()
    parts = [_read_file(path, skip_bad_lines, report) for path in _files(source)]
    user, item, rating, day = (np.concatenate(column) for column in zip(*parts, strict=True))
    del parts
    if user.size == 0:
        raise RecxError(f"{source}: no ratings")
    seconds = day.astype(np.int64)
    del day
    seconds *= 86400
    return RawInteractions(user, item, rating, seconds)
