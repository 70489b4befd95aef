"""SNAP Gowalla check-ins `loc-gowalla_totalCheckins.txt(.gz)`: `user<TAB>time<TAB>lat<TAB>lon<TAB>location`."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from recx.data.formats.columnar import csv_parser
from recx.data.formats.lines import ReadReport, read_lines_table
from recx.data.formats.registry import FORMATS
from recx.data.formats.tables import single_file, to_raw
from recx.data.raw import RawInteractions

NAMES = ["user", "time", "latitude", "longitude", "location"]
TYPES = {
    "user": pa.int64(),
    "time": pa.timestamp("s", tz="UTC"),
    "latitude": pa.float64(),
    "longitude": pa.float64(),
    "location": pa.int64(),
}


@FORMATS.register("gowalla-checkins")
def read_gowalla_checkins(
    source: Path, skip_bad_lines: bool = False, report: ReadReport | None = None, **_
) -> RawInteractions:
    """Every check-in is a (user, location) interaction at its time; repeated check-ins are duplicates that the
    preparation's duplicate step turns into one interaction (the earliest) and counts in the card."""
    path = single_file(
        source, ("loc-gowalla_totalCheckins.txt", "loc-gowalla_totalCheckins.txt.gz"), "gowalla-checkins"
    )
    table = read_lines_table(
        path,
        csv_parser(NAMES, TYPES, "\t", keep=["user", "time", "location"]),
        "user<TAB>YYYY-MM-DDTHH:MM:SSZ<TAB>latitude<TAB>longitude<TAB>location id",
        skip_bad_lines,
        report if report is not None else ReadReport(),
    )
    return to_raw(table, "user", "location", None, "time")
