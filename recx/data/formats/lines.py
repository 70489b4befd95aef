"""Whole-line blocks of a text file (plain or gzip), parsed by a columnar parser; malformed lines found by bisection.

A file is read in blocks of about `BLOCK_BYTES` that end at a line break, and each block goes to a columnar parser
(pyarrow's CSV or JSON reader) in one call. When a block fails to parse, it is cut in halves until the failing
lines are isolated: a valid file costs one parse per block, and each malformed line costs O(log lines) parses.
Malformed lines either raise a RecxError naming the file and line, or (with `skip_bad_lines`) are counted.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

import numpy as np
import pyarrow as pa

from recx.core.errors import RecxError

BLOCK_BYTES = 16 << 20
MAX_BAD_LINES = 10_000
EXAMPLES = 5
PARSE_ERRORS = (pa.ArrowException, ValueError, TypeError, KeyError, UnicodeDecodeError)

Parser = Callable[[bytes], pa.Table]


@dataclass
class ReadReport:
    """What a reader read: each source file with its sha256, and the malformed lines it skipped."""

    files: list[dict] = field(default_factory=list)
    malformed_lines: int = 0
    malformed_examples: list[str] = field(default_factory=list)

    def as_card(self) -> dict:
        return {"malformed_lines": self.malformed_lines, "malformed_examples": self.malformed_examples}


class _HashingReader:
    """A binary file wrapper that feeds every byte read through sha256 (the card's source hash, in the same pass)."""

    def __init__(self, handle: BinaryIO):
        self.handle, self.digest = handle, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        self.digest.update(data)
        return data

    def readable(self) -> bool:
        return True


def _open_text_stream(raw: _HashingReader) -> BinaryIO | _HashingReader:
    """Gzip is recognised by its magic bytes, whatever the file's name."""
    magic = raw.handle.peek(2)[:2] if hasattr(raw.handle, "peek") else b""
    return gzip.GzipFile(fileobj=raw, mode="rb") if magic == b"\x1f\x8b" else raw  # type: ignore[call-overload]


def line_blocks(path: Path, report: ReadReport) -> Iterator[tuple[bytes, int]]:
    """Yield (block, number of its first line): whole lines, CRLF turned into LF, a leading UTF-8 BOM dropped."""
    if not path.is_file():
        raise RecxError(f"{path}: no such file")
    with open(path, "rb") as handle:
        raw = _HashingReader(handle)
        stream = _open_text_stream(raw)
        carry, line = b"", 1
        try:
            while True:
                chunk = stream.read(BLOCK_BYTES)
                if not chunk:
                    break
                data = carry + chunk
                cut = data.rfind(b"\n") + 1
                block, carry = data[:cut], data[cut:]
                if line == 1 and block.startswith(b"\xef\xbb\xbf"):
                    block = block[3:]
                if block:
                    yield _unix(block), line
                    line += block.count(b"\n")
        except (EOFError, OSError, zlib.error) as exc:
            raise RecxError(f"{path}: truncated or corrupt gzip file ({exc})") from None
        if carry:
            yield _unix(carry[3:] if line == 1 and carry.startswith(b"\xef\xbb\xbf") else carry) + b"\n", line
        while raw.read(1 << 22):
            pass
        report.files.append({"path": str(path), "sha256": raw.digest.hexdigest()})


def _unix(block: bytes) -> bytes:
    return block.replace(b"\r\n", b"\n") if b"\r" in block else block


@dataclass
class BlockParser:
    """Parse blocks with `parse`; isolate and report malformed lines (see the module docstring)."""

    path: Path
    parse: Parser
    expected: str
    skip_bad_lines: bool
    report: ReadReport

    def __call__(self, block: bytes, first_line: int) -> list[pa.Table]:
        try:
            return [self.parse(block)]
        except PARSE_ERRORS:
            pass
        ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == ord("\n")) + 1
        starts = np.concatenate([[0], ends[:-1]])
        tables: list[pa.Table] = []
        self._bisect(block, starts, ends, 0, len(ends), first_line, tables)
        return tables

    def _bisect(self, block: bytes, starts, ends, lo: int, hi: int, first_line: int, out: list[pa.Table]) -> None:
        piece = block[starts[lo] : ends[hi - 1]]
        if not piece.strip():
            return
        try:
            out.append(self.parse(piece))
            return
        except PARSE_ERRORS as exc:
            if hi - lo == 1:
                self._bad_line(piece, first_line + lo, exc)
                return
        mid = (lo + hi) // 2
        self._bisect(block, starts, ends, lo, mid, first_line, out)
        self._bisect(block, starts, ends, mid, hi, first_line, out)

    def _bad_line(self, text: bytes, number: int, exc: BaseException) -> None:
        shown = text.rstrip(b"\n")[:120].decode("utf-8", errors="replace")
        where = f"{self.path}, line {number}"
        if not self.skip_bad_lines:
            raise RecxError(
                f"{where}: expected {self.expected}, got {shown!r} ({_short(exc)}); "
                "--skip-bad-lines drops such lines and counts them in the card"
            )
        self.report.malformed_lines += 1
        if len(self.report.malformed_examples) < EXAMPLES:
            self.report.malformed_examples.append(f"{where}: {shown!r}")
        if self.report.malformed_lines > MAX_BAD_LINES:
            raise RecxError(
                f"{self.path}: more than {MAX_BAD_LINES} malformed lines (first: "
                f"{self.report.malformed_examples[0]}); is this file in the format given? "
                f"expected {self.expected}"
            )


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]


def read_lines_table(
    path: Path,
    parse: Parser,
    expected: str,
    skip_bad_lines: bool,
    report: ReadReport,
    header: Callable[[bytes], None] | None = None,
) -> pa.Table:
    """Parse every line of `path` into one table. `header`, when given, checks (and drops) the first non-blank line."""
    parser = BlockParser(path, parse, expected, skip_bad_lines, report)
    tables: list[pa.Table] = []
    pending_header = header is not None
    for block, first_line in line_blocks(path, report):
        if pending_header:
            stripped = block.lstrip(b"\n")
            first_line += len(block) - len(stripped)
            if not stripped:
                continue
            cut = stripped.find(b"\n") + 1
            header(stripped[:cut].rstrip(b"\n"))  # type: ignore[misc]
            block, first_line, pending_header = stripped[cut:], first_line + 1, False
        if block.strip():
            tables.extend(t for t in parser(block, first_line) if t.num_rows)
    if not tables:
        what = "only malformed lines" if report.malformed_lines else "no data lines"
        raise RecxError(f"{path}: the file has {what} (expected {expected})")
    return pa.concat_tables(tables)


def require_non_null(table: pa.Table, columns: list[str]) -> pa.Table:
    """Raise ValueError when a required column is absent or has a null (a line that lacks the field)."""
    for name in columns:
        if name not in table.column_names or table.column(name).null_count:
            raise ValueError(f"missing {name!r}")
    return table
