"""Text files of `user item [rating [timestamp]]` per line, separated by commas, tabs or whitespace (plain or gzip):
one file to be split, or a folder already split as lightgcn's is (`train.txt`, `valid.txt` optional, `test.txt`),
kept as given; the split files must have the same fields.

The first data line fixes the layout: its separator (a comma, else a tab, else runs of spaces) and its number of
fields, 2 (user item), 3 (+ rating) or 4 (+ timestamp). Every other line must have exactly that many fields:
a line that does not fit is refused with its number (or, with --skip-bad-lines, counted), never re-read with
shifted columns. Ids and timestamps are integers, ratings numbers.
"""

from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path

import pyarrow as pa

from recx.core.errors import RecxError
from recx.data.formats.columnar import csv_parser
from recx.data.formats.lines import ReadReport, read_lines_table
from recx.data.formats.registry import FORMATS
from recx.data.formats.tables import to_raw
from recx.data.raw import RawInteractions

NAMES = ["user", "item", "rating", "timestamp"]
TYPES = {"user": pa.int64(), "item": pa.int64(), "rating": pa.float32(), "timestamp": pa.int64()}
SHAPE = "user item, optionally rating, then optionally timestamp"
FIRST_LINE_BYTES = 1 << 20
SPACES = re.compile(rb"[ \t]+")
EDGE_SPACES = re.compile(rb"^ | $", re.MULTILINE)


def _first_line(path: Path) -> tuple[bytes, int]:
    """(first non-blank line, its number), BOM and line end removed; gzip recognised by its magic bytes."""
    if not path.is_file():
        raise RecxError(f"{path}: no such file")
    try:
        with open(path, "rb") as handle:
            stream = gzip.GzipFile(fileobj=handle) if handle.peek(2)[:2] == b"\x1f\x8b" else handle
            head = stream.read(FIRST_LINE_BYTES)
    except (EOFError, OSError, zlib.error) as exc:
        raise RecxError(f"{path}: truncated or corrupt gzip file ({exc})") from None
    for number, line in enumerate(head.removeprefix(b"\xef\xbb\xbf").split(b"\n"), start=1):
        if line.strip():
            if b"\0" in line:
                raise RecxError(f"{path}, line {number}: a binary file, not text (expected lines of {SHAPE})")
            return line.rstrip(b"\r"), number
    raise RecxError(f"{path}: the file has no data lines (expected lines of {SHAPE})")


def _layout(path: Path) -> tuple[bytes, int]:
    """(separator, number of fields) of the first data line."""
    line, number = _first_line(path)
    separator = b"," if b"," in line else b"\t" if b"\t" in line else b" "
    fields = len(SPACES.sub(b" ", line).strip(b" ").split(b" ")) if separator == b" " else len(line.split(separator))
    if not 2 <= fields <= 4:
        shown = line[:120].decode("utf-8", "replace")
        raise RecxError(
            f"{path}, line {number}: expected 2 to 4 fields ({SHAPE}), got {fields}: {shown!r}; recx does not guess which fields to take (give a file of these "
            "columns, or use the format the file is in)"
        )
    return separator, fields


def _parser(separator: bytes, fields: int):
    names = NAMES[:fields]
    parse = csv_parser(names, {name: TYPES[name] for name in names}, separator.decode())
    if separator != b" ":
        return parse
    return lambda block: parse(EDGE_SPACES.sub(b"", SPACES.sub(b" ", block)))


def _read_file(source: Path, skip_bad_lines: bool, report: ReadReport) -> RawInteractions:
    separator, fields = _layout(source)
    shown_separator = {b",": ",", b"\t": "<TAB>", b" ": " "}[separator]
    expected = (
        f"{fields} fields separated by {shown_separator!r} like the first data line "
        f"({shown_separator.join(NAMES[:fields])}; ids and timestamps integers)"
    )
    table = read_lines_table(source, _parser(separator, fields), expected, skip_bad_lines, report)
    return to_raw(table, "user", "item", "rating" if fields >= 3 else None, "timestamp" if fields == 4 else None)


def _fields(raw: RawInteractions) -> int:
    return 2 + (raw.rating is not None) + (raw.timestamp is not None)


def _read_folder(source: Path, skip_bad_lines: bool, report: ReadReport) -> dict[str, RawInteractions]:
    """train.txt, valid.txt (optional) and test.txt, each read as one triplets file with the fields of the first;
    the split is kept as given."""
    splits: dict[str, RawInteractions] = {}
    for split in ("train", "valid", "test"):
        path = source / f"{split}.txt"
        if not path.is_file():
            if split == "valid":
                continue
            raise RecxError(
                f"{source}: missing {split}.txt; the triplets format reads one file, or a folder split as given "
                "(train.txt, test.txt, and valid.txt if any)"
            )
        splits[split] = _read_file(path, skip_bad_lines, report)
        if _fields(splits[split]) != _fields(splits["train"]):
            raise RecxError(
                f"{path}: lines of {_fields(splits[split])} fields, but train.txt's have {_fields(splits['train'])}; "
                f"the split files of a folder must have the same fields ({SHAPE})"
            )
    return splits


@FORMATS.register("triplets")
def read_triplets(
    source: Path, skip_bad_lines: bool = False, report: ReadReport | None = None, **_
) -> RawInteractions | dict[str, RawInteractions]:
    """Lines `user item [rating [timestamp]]` (2 to 4 fields) from one file, or from a split folder's files.

    The separator and field count are those of the first data line; a folder holds train.txt, test.txt and
    optionally valid.txt, kept as given."""
    report = report if report is not None else ReadReport()
    if source.is_dir():
        return _read_folder(source, skip_bad_lines, report)
    return _read_file(source, skip_bad_lines, report)
