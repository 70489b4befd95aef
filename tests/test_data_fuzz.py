"""Arbitrary bytes into every raw-format reader: each either parses or raises RecxError, never anything else; and
the triplets reader, given lines of random field counts, reads exactly the rows written or names the first line
whose field count differs from the first line's (issue 26: a five-field file was read with shifted columns)."""

from __future__ import annotations

import gzip
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recx.core.errors import RecxError
from recx.data.formats.lines import ReadReport
from recx.data.formats.registry import FORMATS

FILES = {
    "movielens": "ratings.dat",
    "netflix": "combined_data_1.txt",
    "amazon-ratings": "r.csv",
    "amazon-reviews": "r.json",
    "yelp": "yelp_academic_dataset_review.json",
    "gowalla-checkins": "loc-gowalla_totalCheckins.txt",
    "triplets": "t.txt",
    "mat": "m.mat",
    "lightgcn": "folder",
}
SEEDS = [
    b"1::2::3::4\n",
    b"1:\n5,3,2005-09-06\n",
    b"A,B,5.0,1\n",
    b'{"reviewerID":"a","asin":"b","overall":1,"unixReviewTime":2}\n',
    b'{"user_id":"a","business_id":"b","stars":1,"date":"2016-03-09 00:00:00"}\n',
    b"0\t2010-10-19T23:55:27Z\t1\t2\t3\n",
    b"1 2\n",
    b"1,2,3.5\n",
    b"1\t2\t3\t4\n",
    b"1 2 3 4 5\n",
    b"7 1 2 3\n",
    b"MATLAB 5.0 MAT-file",
]
payloads = st.one_of(
    st.binary(max_size=300),
    st.lists(
        st.sampled_from(
            SEEDS + [b"\x1f\x8b\x08\x00", b"\n", b"\r\n", b"::", b",", b"\t", b":", b"{", b"\xff", b"-1", b"9" * 30]
        ),
        max_size=12,
    ).map(b"".join),
)


@pytest.mark.parametrize("fmt", sorted(FILES))
@pytest.mark.parametrize("skip", [False, True])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=payloads, compressed=st.booleans())
def test_reader_parses_or_raises_recx_error(fmt, skip, data, compressed):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / FILES[fmt]
        content = gzip.compress(data) if compressed else data
        if fmt == "lightgcn":  # a folder of adjacency lists
            path.mkdir()
            (path / "train.txt").write_bytes(content)
            (path / "test.txt").write_bytes(data[::-1])
        else:
            path.write_bytes(content)
        try:
            raw = FORMATS.get(fmt)(path, skip_bad_lines=skip, report=ReadReport())
        except RecxError:
            return
        for part in raw.values() if isinstance(raw, dict) else [raw]:
            assert len(part) == part.item.shape[0] == part.user.shape[0]


rows = st.lists(
    st.tuples(*[st.integers(0, 10**12)] * 2, st.integers(-5, 5), st.integers(0, 2**40)), min_size=1, max_size=30
)


@settings(max_examples=60, deadline=None)
@given(
    rows=rows,
    fields=st.integers(2, 4),
    separator=st.sampled_from([",", "\t", " ", "  "]),
    bad_at=st.none() | st.integers(1, 29),
    bad_fields=st.sampled_from([1, 2, 3, 4, 5, 6]),
)
def test_triplets_read_exactly_or_name_the_line_that_does_not_fit(rows, fields, separator, bad_at, bad_fields):
    """Line 1 fixes the layout; a later line of another field count is named (a first line of 1, 5 or 6 fields is
    refused itself: test_safety_data)."""
    lines = [separator.join(str(v) for v in row[:fields]) for row in rows]
    wrong = bad_at is not None and bad_at < len(lines) and bad_fields != fields
    if wrong:
        lines[bad_at] = separator.join(str(v) for v in (list(rows[bad_at]) * 2)[:bad_fields])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.txt"
        path.write_text("\n".join(lines) + "\n")
        if not wrong:
            raw = FORMATS.get("triplets")(path)
            assert raw.user.tolist() == [row[0] for row in rows] and raw.item.tolist() == [row[1] for row in rows]
            assert (raw.rating is None) == (fields < 3) and (raw.timestamp is None) == (fields < 4)
            if fields == 4:
                assert raw.timestamp.tolist() == [row[3] for row in rows]
            return
        with pytest.raises(RecxError, match=rf"line {bad_at + 1}\b"):
            FORMATS.get("triplets")(path)
