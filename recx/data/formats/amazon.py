"""Amazon reviews (McAuley et al.): ratings-only CSV `user,item,rating,timestamp` and 5-core review JSON lines."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from recx.data.formats.columnar import csv_parser, json_parser
from recx.data.formats.lines import ReadReport, read_lines_table
from recx.data.formats.registry import FORMATS
from recx.data.formats.tables import to_raw
from recx.data.raw import RawInteractions

CSV_NAMES = ["user", "item", "rating", "timestamp"]
CSV_TYPES = {"user": pa.string(), "item": pa.string(), "rating": pa.float32(), "timestamp": pa.int64()}
REVIEW_SCHEMA = pa.schema(
    [("reviewerID", pa.string()), ("asin", pa.string()), ("overall", pa.float32()), ("unixReviewTime", pa.int64())]
)


@FORMATS.register("amazon-ratings")
def read_amazon_ratings(
    source: Path, skip_bad_lines: bool = False, report: ReadReport | None = None, **_
) -> RawInteractions:
    """A ratings-only CSV (no header), plain or gzipped."""
    table = read_lines_table(
        source,
        csv_parser(CSV_NAMES, CSV_TYPES, ","),
        "user,item,rating,timestamp",
        skip_bad_lines,
        report if report is not None else ReadReport(),
    )
    return to_raw(table, "user", "item", "rating", "timestamp")


@FORMATS.register("amazon-reviews")
def read_amazon_reviews(
    source: Path, skip_bad_lines: bool = False, report: ReadReport | None = None, **_
) -> RawInteractions:
    """5-core review JSON lines (reviewerID, asin, overall, unixReviewTime; other fields ignored), plain or gzipped."""
    table = read_lines_table(
        source,
        json_parser(REVIEW_SCHEMA),
        "a JSON object with reviewerID, asin, overall and unixReviewTime",
        skip_bad_lines,
        report if report is not None else ReadReport(),
    )
    return to_raw(table, "reviewerID", "asin", "overall", "unixReviewTime")
