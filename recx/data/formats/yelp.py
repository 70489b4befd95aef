"""Yelp Open Dataset `yelp_academic_dataset_review.json`: JSON lines with user_id, business_id, stars, date."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from recx.data.formats.columnar import json_parser
from recx.data.formats.lines import ReadReport, read_lines_table
from recx.data.formats.registry import FORMATS
from recx.data.formats.tables import single_file, to_raw
from recx.data.raw import RawInteractions

SCHEMA = pa.schema(
    [("user_id", pa.string()), ("business_id", pa.string()), ("stars", pa.float32()), ("date", pa.timestamp("s"))]
)


@FORMATS.register("yelp")
def read_yelp(source: Path, skip_bad_lines: bool = False, report: ReadReport | None = None, **_) -> RawInteractions:
    """The review file (or a folder holding it); `date` ('YYYY-MM-DD HH:MM:SS') is read as UTC seconds."""
    path = single_file(source, ("yelp_academic_dataset_review.json", "yelp_academic_dataset_review.json.gz"), "yelp")
    table = read_lines_table(
        path,
        json_parser(SCHEMA),
        "a JSON object with user_id, business_id, stars and date",
        skip_bad_lines,
        report if report is not None else ReadReport(),
    )
    return to_raw(table, "user_id", "business_id", "stars", "date")
