"""MovieLens ratings: `ratings.dat` (`UserID::MovieID::Rating::Timestamp`, ML-1M/10M) and `ratings.csv` (ML-20M/25M).

Ids are 32-bit integers (MovieLens ids are far below 2^31).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from recx.core.errors import RecxError
from recx.data.formats.columnar import csv_parser
from recx.data.formats.lines import ReadReport, read_lines_table, require_non_null
from recx.data.formats.registry import FORMATS
from recx.data.formats.tables import single_file, to_raw
from recx.data.raw import RawInteractions

NAMES = ["user", "item", "rating", "timestamp"]
TYPES = {"user": pa.int32(), "item": pa.int32(), "rating": pa.float32(), "timestamp": pa.int64()}
CSV_HEADER = b"userid,movieid,rating,timestamp"
DAT_NAMES = ["user", "gap1", "item", "gap2", "rating", "gap3", "timestamp"]
DAT_TYPES = {**TYPES, "gap1": pa.null(), "gap2": pa.null(), "gap3": pa.null()}


def _dat_parser():
    """`::` is two characters, which CSV readers do not take: split on ':' and require every second field empty."""
    parse = csv_parser(DAT_NAMES, DAT_TYPES, ":", empty_is_null=True)

    def run(block: bytes) -> pa.Table:
        return require_non_null(parse(block), NAMES).select(NAMES)

    return run


def _check_header(path: Path):
    def check(line: bytes) -> None:
        if line.strip().lower().replace(b" ", b"") != CSV_HEADER:
            raise RecxError(
                f"{path}, line 1: expected the header 'userId,movieId,rating,timestamp', got "
                f"{line[:120].decode('utf-8', 'replace')!r}"
            )

    return check


@FORMATS.register("movielens")
def read_movielens(
    source: Path, skip_bad_lines: bool = False, report: ReadReport | None = None, **_
) -> RawInteractions:
    """A `ratings.dat` or `ratings.csv` file (or a folder holding exactly one of them); chosen by the file suffix."""
    path = single_file(source, ("ratings.dat", "ratings.csv"), "movielens")
    report = report if report is not None else ReadReport()
    if path.name.removesuffix(".gz").endswith(".csv"):
        table = read_lines_table(
            path,
            csv_parser(NAMES, TYPES, ","),
            "userId,movieId,rating,timestamp",
            skip_bad_lines,
            report,
            header=_check_header(path),
        )
    else:
        table = read_lines_table(
            path,
            _dat_parser(),
            "UserID::MovieID::Rating::Timestamp (integers, rating a number)",
            skip_bad_lines,
            report,
        )
    return to_raw(table, "user", "item", "rating", "timestamp")
