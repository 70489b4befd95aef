"""Columnar parsers for line blocks: pyarrow CSV with fixed columns and types, and pyarrow JSON lines."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.json as pjson

from recx.data.formats.lines import Parser, require_non_null

CSV_BLOCK = 16 << 20


def csv_parser(
    names: list[str],
    types: dict[str, pa.DataType],
    delimiter: str,
    keep: list[str] | None = None,
    empty_is_null: bool = False,
) -> Parser:
    """A CSV block parser: no header, no quoting, exact column count; an empty field is malformed (or null)."""
    read = pcsv.ReadOptions(column_names=names, block_size=CSV_BLOCK)
    parse = pcsv.ParseOptions(delimiter=delimiter, quote_char=False, escape_char=False, ignore_empty_lines=True)
    convert = pcsv.ConvertOptions(
        column_types=types,
        include_columns=keep or names,
        null_values=[""] if empty_is_null else [],
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
        true_values=[],
        false_values=[],
    )

    def run(block: bytes) -> pa.Table:
        table = pcsv.read_csv(pa.BufferReader(block), read_options=read, parse_options=parse, convert_options=convert)
        return _non_empty_strings(table)

    return run


def json_parser(schema: pa.Schema) -> Parser:
    """A JSON-lines block parser keeping only `schema`'s fields; every field is required."""
    read = pjson.ReadOptions(block_size=CSV_BLOCK)
    parse = pjson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")

    def run(block: bytes) -> pa.Table:
        table = pjson.read_json(pa.BufferReader(block), read_options=read, parse_options=parse)
        return _non_empty_strings(require_non_null(table, schema.names))

    return run


def _non_empty_strings(table: pa.Table) -> pa.Table:
    """Ids given as strings must not be empty."""
    for name, column in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_string(column.type) and pc.any(pc.equal(column, "")).as_py():
            raise ValueError(f"empty {name!r}")
    return table
